"""The dequeue job killed (SIGKILL, its own JVM) after it wrote the sink and before it
completed the batch: run again once the locks ended, the sink holds every message's row
exactly once and the queue is empty (issue 9)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.jobs import dequeue

pytestmark = [pytest.mark.spark, pytest.mark.slow]
TESTS = Path(__file__).resolve().parents[1]
LOCK = timedelta(seconds=5)

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, sys.argv[1])
    import sbqueue.jobs.dequeue as dequeue
    real = dequeue.write_sink

    def write_then_die(*args, **kwargs):
        real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)  # the sink is written, nothing settled

    dequeue.write_sink = write_then_die
    sys.exit(dequeue.main(sys.argv[2:]))
    """
)


def test_a_crash_between_sink_and_complete_duplicates_nothing(clock, admin, spark, namespace_root,
                                                              tmp_path) -> None:
    admin.create_queue("work", enable_partitioning=True, lock_duration=LOCK)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("work").send_messages(
            [ServiceBusMessage(f"m{i}") for i in range(10)])
    sink = str(tmp_path / "sink")
    argv = ["--namespace", namespace_root, "--entity", "work", "--sink", sink,
            "--function", "dequeue_functions:upper"]
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.run([sys.executable, str(script), str(TESTS), *argv],
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == -9, (proc.stdout, proc.stderr[-3000:])
    assert spark.read.format("delta").load(sink).count() == 10  # written, not settled
    clock.advance(LOCK)  # the dead job's locks end
    assert dequeue.main([*argv, "--batches", "0"]) == 0  # delivered again, written again
    rows = spark.read.format("delta").load(sink).collect()
    assert sorted(r["text"] for r in rows) == sorted(f"M{i}" for i in range(10))
    assert admin.namespace.entity("work").counts()["total"] == 0
