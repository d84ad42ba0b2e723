"""A local session names the Delta jars Ivy resolved before instead of running Ivy again
(decision 025): only when the record is complete and every file is still there."""

from __future__ import annotations

from pathlib import Path

import pytest

from sbqueue.spark.jars import PACKAGES, record_resolved, use_resolved

DELTA = "io.delta:delta-spark_4.2_2.13:4.4.0"


class _Started:
    """What a started session's conf answers (``SparkConf.get``)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


@pytest.fixture
def ivy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SBQUEUE_CACHE_DIR", str(tmp_path / "cache"))
    jars = tmp_path / "ivy" / "jars"
    jars.mkdir(parents=True)
    for name in ("io.delta_delta-spark_4.2_2.13-4.4.0.jar", "io.delta_delta-storage-4.4.0.jar",
                 "org.antlr_antlr4-runtime-4.13.1.jar"):
        (jars / name).write_bytes(b"jar")
    return jars


def _conf() -> dict[str, str]:
    return {PACKAGES: DELTA, "spark.jars": "/own/logstore.jar",
            "spark.jars.ivySettings": "/conf/ivysettings.xml"}


def _started(ivy: Path) -> _Started:
    listed = ["file:///own/logstore.jar", *(f"file://{p}" for p in sorted(ivy.iterdir()))]
    return _Started({"spark.repl.local.jars": ",".join(listed)})


def test_without_a_record_the_packages_stay(ivy: Path) -> None:
    conf = _conf()
    assert not use_resolved(conf)
    assert conf == _conf()


def test_a_recorded_resolution_replaces_ivy(ivy: Path) -> None:
    record_resolved(DELTA, _started(ivy), "/own/logstore.jar")  # type: ignore[arg-type]
    conf = _conf()
    assert use_resolved(conf)
    assert PACKAGES not in conf and "spark.jars.ivySettings" not in conf
    jars = conf["spark.jars"].split(",")
    assert jars[0] == "/own/logstore.jar"
    assert sorted(jars[1:]) == sorted(str(p) for p in ivy.iterdir())


def test_a_missing_jar_falls_back_to_ivy(ivy: Path) -> None:
    record_resolved(DELTA, _started(ivy), "/own/logstore.jar")  # type: ignore[arg-type]
    (ivy / "io.delta_delta-storage-4.4.0.jar").unlink()
    conf = _conf()
    assert not use_resolved(conf)
    assert conf == _conf()


def test_other_packages_are_not_served_by_this_record(ivy: Path) -> None:
    record_resolved(DELTA, _started(ivy), "/own/logstore.jar")  # type: ignore[arg-type]
    conf = {**_conf(), PACKAGES: f"{DELTA},org.example:extra_2.13:1.0"}
    assert not use_resolved(conf)


def test_a_session_without_the_package_records_nothing(ivy: Path) -> None:
    """A session that did not resolve the packages (say one someone else started) must
    not teach a list without Delta in it."""
    other = _Started({"spark.repl.local.jars": f"file://{ivy}/org.antlr_antlr4-runtime-4.13.1.jar"})
    record_resolved(DELTA, other, "/own/logstore.jar")  # type: ignore[arg-type]
    assert not use_resolved(_conf())
