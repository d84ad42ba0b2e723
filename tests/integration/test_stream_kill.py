"""Issue 22 point 1: the driver of a streaming query into a queue killed (SIGKILL) at
random moments, between micro-batches and inside them, and restarted from its checkpoint:
every input row is in the queue exactly once (docs/decisions/024)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stream_files import write_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]
PROGRAM = Path(__file__).resolve().parents[1] / "stream_program.py"
KILLS = 3


def _start(args: list[str], mode: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, str(PROGRAM), *args, mode], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _sent(admin, queue: str) -> list[str]:
    rows = admin.namespace.entity(queue).messages().select("message_id").collect()
    return [r[0] for r in rows]


def test_a_killed_query_restarted_sends_every_row_once(admin, spark, namespace_root,
                                                       tmp_path) -> None:
    admin.create_queue("orders", enable_partitioning=True)
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    ids = write_files(source, 0, 24, per_file=6)  # a batch takes about a second
    args = [namespace_root, "orders", str(source), str(checkpoint)]
    rng, log = random.Random(22), tmp_path / "program.log"
    entity = admin.namespace.entity("orders")
    for _ in range(KILLS):
        before = entity.counts()["total"]
        child = _start(args, "forever", log)
        deadline = time.monotonic() + 240
        while entity.counts()["total"] == before and time.monotonic() < deadline:
            assert child.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)  # the JVM is up and a batch went through
        time.sleep(rng.uniform(0.2, 2.5))  # then die anywhere, often inside a batch
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    drained = _start(args, "drain", log)
    assert drained.wait(timeout=600) == 0, log.read_text()[-3000:]
    sent = _sent(admin, "orders")
    assert len(sent) == len(set(sent)), "a row was sent twice"
    assert sorted(sent) == sorted(ids)
