"""Issue 2 point 2: when Java is missing or the first jar download fails, one clear message."""

from __future__ import annotations

import pytest

from sbqueue.exceptions import SparkSetupError
from sbqueue.spark import local_conf, logstore, session

pytestmark = pytest.mark.slow


def test_missing_java_says_what_to_do(monkeypatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SparkSetupError, match="Java was not found") as info:
        session._check_java()
    assert "JAVA_HOME" in str(info.value)


def test_failed_jar_download_says_what_to_do(tmp_path) -> None:
    """A real Ivy resolution of a Delta version that does not exist."""
    conf = local_conf()
    conf["spark.jars.packages"] = "io.delta:delta-spark_4.2_2.13:0.0.404"
    conf["spark.jars.ivy"] = str(tmp_path / "ivy")
    with pytest.raises(SparkSetupError) as info:
        logstore._resolve_packages(conf)
    text = str(info.value)
    assert "first download of the Delta jars" in text
    assert "io.delta:delta-spark_4.2_2.13:0.0.404" in text
    assert "mvn dependency:get" in text
    assert "unresolved dependency" in text.lower() or "not found" in text.lower()  # Ivy's words
