"""Issue 5 point 6: a session configured elsewhere is used as is (no Spark needed here)."""

from __future__ import annotations

import pytest

from sbqueue.spark.session import configured_elsewhere


@pytest.mark.parametrize(("variable", "origin"), [
    ("PYSPARK_GATEWAY_PORT", "spark-submit"),
    ("SPARK_REMOTE", "Spark Connect"),
    ("DATABRICKS_RUNTIME_VERSION", "Databricks"),
])
def test_configured_elsewhere_names_the_launcher(monkeypatch, variable, origin) -> None:
    for name in ("PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "DATABRICKS_RUNTIME_VERSION"):
        monkeypatch.delenv(name, raising=False)
    assert configured_elsewhere() is None  # plain python: sbqueue builds a local session
    monkeypatch.setenv(variable, "x")
    assert configured_elsewhere() == origin


def test_the_package_carries_its_spark_defaults() -> None:
    from sbqueue.spark.paths import conf_dir

    assert (conf_dir() / "spark-defaults.conf").is_file()
    assert (conf_dir() / "ivysettings.xml").is_file()
    assert "site-packages" in str(conf_dir()) or conf_dir().parent.name == "spark"
