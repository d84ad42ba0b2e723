"""Issue 41 item 2: the top-level ``pyspark_sbqueue`` module that Spark imports to know
``format("sbqueue")`` without ``register``. No JVM: Spark's own lookup code
(``pyspark.sql.worker.lookup_data_sources``) runs in a plain Python process, as Spark's
worker runs it; the sessions that use it are ``tests/integration/test_format_found.py``."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql.datasource import DataSource

from sbqueue.datasource import SbqueueDataSource
from sbqueue.engine.reads.view_here import VIEW_SCHEMA
from sbqueue.exceptions import InvalidOperationError

REPO = Path(__file__).resolve().parents[2]

# Spark's lookup, as its worker runs it (``_main``), with what it sends back to the JVM
# read again: the names it found, their classes, and what the import cost.
LOOKUP = """
import io, sys
from pyspark.serializers import UTF8Deserializer, read_int
from pyspark.sql.worker import lookup_data_sources
from pyspark.worker_util import pickleSer

sent = io.BytesIO()
lookup_data_sources._main(None, sent)
sent.seek(0)
for _ in range(read_int(sent)):
    name = UTF8Deserializer().loads(sent)
    source = pickleSer._read_with_length(sent)
    print("found", name, source.__module__, source.__qualname__)
started = __import__("pyspark").SparkContext._gateway is not None
print("imported sbqueue", "sbqueue" in sys.modules, "started spark", started)
"""


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("pyspark_sbqueue")


def test_spark_lookup_registers_it_as_sbqueue(tmp_path: Path) -> None:
    """Found on the path where the wheel puts it (site-packages; here the checkout's root),
    under the name ``sbqueue``, without importing sbqueue or starting Spark."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    run = subprocess.run([sys.executable, "-c", LOOKUP], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": path})
    assert run.returncode == 0, run.stderr[-3000:]
    found = [line for line in run.stdout.splitlines() if line.startswith("found ")]
    assert found == ["found sbqueue pyspark_sbqueue DefaultSource"], run.stdout
    assert "imported sbqueue False started spark False" in run.stdout


def test_the_module_is_spark_s_kind(module: ModuleType) -> None:
    source = module.DefaultSource
    assert issubclass(source, DataSource)
    assert source.name() == SbqueueDataSource.name() == "sbqueue"


def test_it_hands_every_method_of_the_source_over(module: ModuleType) -> None:
    """Whatever ``SbqueueDataSource`` implements of Spark's ``DataSource`` (a writer added
    one day), Spark's ``DefaultSource`` offers too."""
    implemented = {name for name in vars(SbqueueDataSource) if hasattr(DataSource, name)}
    assert implemented >= {"name", "schema", "reader", "streamReader", "streamWriter"}
    missing = sorted(implemented - set(vars(module.DefaultSource)))
    assert not missing, f"pyspark_sbqueue.DefaultSource does not hand over {missing}"


def test_it_answers_as_the_source_does(module: ModuleType) -> None:
    assert module.DefaultSource({}).schema() == VIEW_SCHEMA
    with pytest.raises(InvalidOperationError, match=r"needs \.option\("):
        module.DefaultSource({}).reader(VIEW_SCHEMA)
    with pytest.raises(InvalidOperationError, match="relative path"):
        module.DefaultSource({"namespace": "ns", "entity": "q"}).streamReader(VIEW_SCHEMA)
