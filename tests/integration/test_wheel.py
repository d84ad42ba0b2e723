"""The built wheel in a fresh venv, run by path with a bare environment (issue 17).

`.ci/wheel-check` builds the wheel, installs it alone into a new virtual environment and
runs ``sbqueue demo`` and ``tests/venv_program.py`` with ``PATH=/usr/bin:/bin`` and no
``VIRTUAL_ENV`` / ``PYSPARK_*``: keyed sends, a receive, a DataFrame job with a UDF and a
topic send through a SQL filter all need Spark's Python workers to run the venv's
interpreter, not the first ``python3`` on ``PATH``. The wheel holds ``pyspark_sbqueue.py``
beside the package, and ``format("sbqueue")`` reads without ``register`` (issue 41).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_wheel_runs_from_an_unactivated_venv() -> None:
    run = subprocess.run(["bash", str(REPO / ".ci" / "wheel-check")], capture_output=True,
                         text=True, timeout=1800, stdin=subprocess.DEVNULL)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "venv-program: ok" in run.stdout
    assert "wheel-check: ok" in run.stdout
