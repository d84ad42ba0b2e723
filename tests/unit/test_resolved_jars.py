"""A local session names the Delta jars Ivy resolved before instead of running Ivy again
(decision 025): only for the same Ivy settings, when the record is complete and every
file is still there; only Ivy's own jars are recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from sbqueue.spark.jars import PACKAGES, record_of, record_resolved, use_resolved

DELTA = "io.delta:delta-spark_4.2_2.13:4.4.0"
RESOLVED = ("io.delta_delta-spark_4.2_2.13-4.4.0.jar", "io.delta_delta-storage-4.4.0.jar",
            "org.antlr_antlr4-runtime-4.13.1.jar")


@pytest.fixture
def ivy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SBQUEUE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "ivy" / "jars").mkdir(parents=True)
    for name in RESOLVED:
        (tmp_path / "ivy" / "jars" / name).write_bytes(b"jar")
    (tmp_path / "own.jar").write_bytes(b"jar")  # sbqueue's log store, or a user's jar
    return tmp_path / "ivy"


def _conf(ivy: Path) -> dict[str, str]:
    return {PACKAGES: DELTA, "spark.jars": str(ivy.parent / "own.jar"),
            "spark.jars.ivy": str(ivy), "spark.jars.ivySettings": "/conf/ivysettings.xml"}


def _started(ivy: Path) -> str:
    """A started session's ``spark.repl.local.jars``: the user's jar and Ivy's."""
    return ",".join([f"file://{ivy.parent / 'own.jar'}",
                     *(f"file://{ivy / 'jars' / n}" for n in RESOLVED)])


def _record(ivy: Path, conf: dict[str, str] | None = None) -> None:
    conf = conf or _conf(ivy)
    record = record_of(conf)
    assert record is not None
    record_resolved(record, conf[PACKAGES], conf["spark.jars.ivy"], _started(ivy))


def test_without_a_record_the_packages_stay(ivy: Path) -> None:
    conf = _conf(ivy)
    assert not use_resolved(conf)
    assert conf == _conf(ivy)


def test_a_recorded_resolution_replaces_ivy_and_keeps_the_users_jars(ivy: Path) -> None:
    _record(ivy)
    conf = {**_conf(ivy), "spark.jars": f"{ivy.parent / 'own.jar'},hdfs://nn/lib/x.jar"}
    assert use_resolved(conf)
    assert PACKAGES not in conf and "spark.jars.ivySettings" not in conf
    jars = conf["spark.jars"].split(",")
    assert jars[:2] == [str(ivy.parent / "own.jar"), "hdfs://nn/lib/x.jar"]  # as given
    assert sorted(jars[2:]) == sorted(str(ivy / "jars" / n) for n in RESOLVED)


def test_only_ivys_own_jars_are_recorded(ivy: Path) -> None:
    _record(ivy)
    recorded = record_of(_conf(ivy)).read_text().split()  # type: ignore[union-attr]
    assert sorted(Path(p).name for p in recorded) == sorted(RESOLVED)


def test_a_missing_jar_falls_back_to_ivy(ivy: Path) -> None:
    _record(ivy)
    (ivy / "jars" / "io.delta_delta-storage-4.4.0.jar").unlink()
    conf = _conf(ivy)
    assert not use_resolved(conf)
    assert conf == _conf(ivy)


def test_other_ivy_settings_are_another_resolution(ivy: Path) -> None:
    """An exclude (or other repositories, cache or settings) may resolve other jars."""
    _record(ivy)
    assert not use_resolved({**_conf(ivy), "spark.jars.excludes": "org.antlr:antlr4-runtime"})
    assert not use_resolved({**_conf(ivy), PACKAGES: f"{DELTA},org.example:extra_2.13:1.0"})
    assert use_resolved(_conf(ivy))


def test_a_session_without_the_package_or_a_bad_record_teaches_nothing(ivy: Path) -> None:
    conf = _conf(ivy)
    record = record_of(conf)
    assert record is not None
    record_resolved(record, DELTA, str(ivy), f"file://{ivy / 'jars' / RESOLVED[2]}")
    assert not use_resolved(conf)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_bytes(b"\xff\xfe not text")
    assert not use_resolved(conf)
