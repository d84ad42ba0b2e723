"""Issue 21 point 1, issue 42 point 2: the chaos soak, as its command runs it, for three
minutes with kills, then the final drain. Every invariant of ``soak_check`` (docs/spec.md
S5-S13, S16.2) must hold: the command exits 0 only when each has no violation. And each
role did its work, counted in messages (not attempts): the senders sent, the receivers and
the session workers received and completed, the taker took, the DataFrame drain and the
transactions completed, the forwarder forwarded, the maintainer maintained.
``test_soak_check`` and ``test_soak_faults`` show the checker finds each kind of
violation; this shows a real run of every role, killed at random, has none."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("soaks")]  # see test_soak_faults

KINDS = ("sent", "received", "completed", "forwarded", "maintained", "errors")
# What each role must have done at least once (the seeds give the session workers, the
# taker, the DataFrame drain and the forwarder work from the start)
EXPECTED = {
    "sender": ("sent",), "sender#2": ("sent",), "frame-sender": ("sent",),
    "receiver": ("received", "completed"), "receiver#2": ("received", "completed"),
    "taker": ("received", "completed"), "drain": ("received", "completed"),
    "transaction": ("received", "completed"),
    "session-worker": ("received", "completed"), "session-worker#2": ("received", "completed"),
    "forwarder": ("forwarded",), "maintainer": ("maintained",),
}


def parse(table: str) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Per role, its counts; per process, its kills."""
    work: dict[str, dict[str, int]] = {}
    kills: dict[str, int] = {}
    row = r"^(\S+)\s+(\w+)" + r"\s+(\d+)" * (len(KINDS) + 1) + r"$"
    for m in re.finditer(row, table, re.M):
        work[m[1]] = dict(zip(KINDS, map(int, m.groups()[2:-1]), strict=True))
        kills[m[2]] = int(m.groups()[-1])
    return work, kills


# On S3 (issue 44 point 5, decisions 042 and 052) the soak runs with ``SBQUEUE_SOAK_STORE=s3``:
# 578 s alone, 755 s beside the rest of the full suite; not in CI while the 20-minute soak on
# S3 finds violations (decision 052).
STORES = ["local", "s3"] if os.environ.get("SBQUEUE_SOAK_STORE") == "s3" else ["local"]


@pytest.mark.parametrize("store", STORES)
def test_the_chaos_soak_keeps_every_invariant_through_kills(
        tmp_path: Path, store: str, request: pytest.FixtureRequest) -> None:
    """On a local folder, and on the S3 server where asked: the roles' processes reach it
    through the AWS environment, their Spark through S3A. On S3 the DataFrame drain's
    receive (the Spark executor against moto, on two cores beside the rest) took 106 s in
    a trial, longer than its lock, so its completes were refused as lock lost, rightly:
    there it must receive, not complete (decision 042)."""
    root = str(tmp_path / "ns") if store == "local" else str(request.getfixturevalue("s3_root"))
    run = subprocess.run(
        [sys.executable, str(HERE / "soak.py"), "--minutes", "3", "--kill-every", "40",
         "--root", root, "--seed", "7"],
        capture_output=True, text=True, timeout=2400, stdin=subprocess.DEVNULL)
    table = run.stdout
    assert run.returncode == 0, table + run.stderr[-3000:]
    work, kills = parse(table)
    assert sum(kills.values()) >= 1, table  # the run was killed at least once
    assert set(work) == set(EXPECTED), table
    expected = {**EXPECTED, "drain": ("received",)} if store == "s3" else EXPECTED
    idle = [(role, kind) for role, kinds in expected.items() for kind in kinds
            if work[role][kind] == 0]
    assert not idle, f"roles that did none of their work: {idle}\n{table}"
