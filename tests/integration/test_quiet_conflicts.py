"""Conflicts sbqueue handles leave no trace on the user's output (issue 17).

Four session workers of one program on a one-partition session queue conflict with each
other (session locks, receives and settlements on one ledger partition). Their program runs
in its own process with its standard error captured: sbqueue retries the conflicts (counted,
logged at DEBUG through ``logging``), and no Java stack trace or py4j text appears.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROGRAM = Path(__file__).resolve().parents[1] / "conflict_program.py"


def test_retried_conflicts_print_no_java_trace(tmp_path: Path) -> None:
    log = tmp_path / "debug.log"
    run = subprocess.run([sys.executable, str(PROGRAM), str(log)], capture_output=True,
                         text=True, timeout=1500, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-3000:]
    retried = int(re.search(r"conflicts retried: (\d+)", run.stdout).group(1))
    assert retried > 0, "the workers did not conflict: the test proves nothing"
    assert "retried" in log.read_text()  # the DEBUG lines went to logging
    traces = [line for line in run.stderr.splitlines()
              if re.match(r"\s+at [\w$.]+\(", line) or "py4j" in line.lower()
              or " ERROR " in line or "Exception" in line]
    assert traces == [], "\n".join(traces[:20])
