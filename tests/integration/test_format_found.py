"""Issue 41 item 2: ``format("sbqueue")`` is known in any session where sbqueue is
installed, with no ``register(spark)``: Spark finds the top-level ``pyspark_sbqueue``
module itself (its ``DefaultSource``) at its first data source lookup.

Each test starts a new JVM, from a folder other than the checkout (Spark's Python workers
have their working folder on their path, so a JVM started in the checkout would find the
module there whatever the install). The checkout's root, which holds
``pyspark_sbqueue.py``, is on ``PYTHONPATH`` as site-packages is for an installed wheel
(an editable install maps modules with an import hook that Spark's lookup does not see;
``.ci/wheel-check`` runs the real wheel).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "tests" / "format_program.py"
EXPECTED = [f"m{i}" for i in range(5)]

pytestmark = pytest.mark.slow


def _environment(**more: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **more}


def _summary(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    [line] = [x for x in result.stdout.splitlines() if x.startswith("format-program ")]
    summary: dict[str, object] = json.loads(line.split(" ", 1)[1])
    return summary


def _check(summary: dict[str, object]) -> None:
    assert summary["read"] == EXPECTED  # spark.read.format("sbqueue")
    assert summary["streamed"] == EXPECTED  # readStream and writeStream .format("sbqueue")
    assert summary["left_in"] == 0  # the stream source completed what it delivered
    assert summary["after_register"] == EXPECTED  # register() after Spark's own: no clash


def test_a_new_session_finds_the_source_without_register(tmp_path: Path) -> None:
    """The local session ``get_session()`` starts, in a process that never registers."""
    result = subprocess.run(
        [sys.executable, str(PROGRAM), str(tmp_path / "ns"), str(tmp_path / "checkpoint")],
        capture_output=True, text=True, timeout=900, env=_environment(), cwd=tmp_path,
        stdin=subprocess.DEVNULL)
    _check(_summary(result))


# spark-submit resolves the Delta jars with Ivy in the shared cache: one worker at a time
@pytest.mark.xdist_group("spark-submit")
def test_a_spark_submit_job_finds_the_source_without_register(tmp_path: Path) -> None:
    """The session spark-submit configured: nothing of sbqueue runs before the read."""
    from sbqueue.spark import submit_properties
    from sbqueue.spark.logstore import _pyspark_home

    result = subprocess.run(
        [str(_pyspark_home() / "bin" / "spark-submit"), "--master", "local[1]",
         "--properties-file", str(submit_properties()), str(PROGRAM),
         str(tmp_path / "ns"), str(tmp_path / "checkpoint")],
        capture_output=True, text=True, timeout=900,
        env=_environment(PYSPARK_PYTHON=sys.executable), cwd=tmp_path, stdin=subprocess.DEVNULL)
    summary = _summary(result)
    assert summary["master"] == "local[1]"  # spark-submit's session, used as is
    _check(summary)
