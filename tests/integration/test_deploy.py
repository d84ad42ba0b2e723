"""Issue 5 point 6: spark-submit's session is used as is; documents on object stores go
through public Delta APIs only (no JVM handles)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# spark-submit resolves the Delta jars with Ivy in the shared cache: one worker at a time
pytestmark = pytest.mark.xdist_group("spark-submit")


@pytest.mark.slow
def test_spark_submit_master_wins(tmp_path) -> None:
    """The job's get_session() keeps spark-submit's --master instead of building local[2]."""
    from sbqueue.spark import submit_properties
    from sbqueue.spark.logstore import _pyspark_home

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [str(_pyspark_home() / "bin" / "spark-submit"), "--master", "local[1]",
         "--properties-file", str(submit_properties()),
         str(REPO / "jobs" / "demo.py"), str(tmp_path / "ns"), "30"],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "master=local[1]" in result.stdout
    assert "sent=30" in result.stdout and "completed=30" in result.stdout


@pytest.mark.spark
def test_delta_document_store_is_exclusive_and_complete(spark, tmp_path) -> None:
    """The object-store catalog (used for abfss:, gs:, s3a:) on a real Delta table."""
    from sbqueue.store.documents import DeltaDocumentStore, DocumentExists

    store = DeltaDocumentStore(spark, str(tmp_path / "root"))
    assert store.read("a/x.json") is None
    store.create("a/x.json", {"v": 1})
    with pytest.raises(DocumentExists):
        store.create("a/x.json", {"v": 2})
    assert store.read("a/x.json") == {"v": 1}
    store.replace("a/x.json", {"v": 3})
    store.create("a/y.json", {"v": 4})
    store.create("b/z.json", {"v": 5})
    assert store.list("a") == ["a/x.json", "a/y.json"]
    assert store.read("a/x.json") == {"v": 3}
    assert store.delete("a/x.json") and not store.delete("a/x.json")
    assert store.list("a") == ["a/y.json"]
