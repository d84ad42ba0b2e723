"""S13.4 under a crash: a forwarder in a child process (its own JVM) is killed with SIGKILL
after it claimed a batch, after it read the batch's messages as it starts writing the
destination, after it wrote the destination, and after it settled the source. Another
forwarder then runs; every message must be at the destination exactly once and nowhere
else."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.engine.forward.job import Forwarder

pytestmark = [pytest.mark.spark, pytest.mark.slow]

POINTS = ("claimed", "moving", "written", "released")
MESSAGES = 20
LEASE = timedelta(seconds=5)  # the source's lock duration: a dead step's batch lease

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from sbqueue import ServiceBusClient
    from sbqueue.engine.forward.job import Forwarder
    root, source, point = sys.argv[1], sys.argv[2], sys.argv[3]

    def kill():
        os.kill(os.getpid(), signal.SIGKILL)

    def hook(name):
        if name == {"moving": "writing"}.get(point, point):
            kill()

    namespace = ServiceBusClient(root).namespace
    Forwarder(namespace, source, batch=8, crash=hook).step()
    print("returned", flush=True)
    """
)


@pytest.mark.parametrize("store_pass", ["local", "s3"], indirect=True)
def test_s13_4_a_killed_forwarder_neither_loses_nor_duplicates(clock, admin, spark, namespace_root,
                                                               tmp_path) -> None:
    """On a local folder and on S3 (issue 44 point 5: the driver's commits there)."""
    with ServiceBusClient(namespace_root, spark=spark) as client:
        for point in POINTS:
            admin.create_queue(f"to-{point}", enable_partitioning=True)
            admin.create_queue(point, enable_partitioning=True, forward_to=f"to-{point}",
                               lock_duration=LEASE)
            client.get_queue_sender(point).send_messages(
                [ServiceBusMessage(f"{point}-{i}", message_id=f"{point}-{i}")
                 for i in range(MESSAGES)])
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    for point in POINTS:  # one at a time: a cold JVM each is slow enough on two cores
        proc = subprocess.run([sys.executable, str(script), namespace_root, point, point],
                              capture_output=True, text=True, timeout=900, check=False)
        assert proc.returncode == -9, (point, proc.stdout, proc.stderr[-3000:])  # killed
    clock.advance(LEASE)  # the dead steps' leases run out
    expected = sorted(f"{p}-{i}" for p in POINTS for i in range(MESSAGES))
    delivered: list[str] = []
    for point in POINTS:
        result = Forwarder(admin.namespace, point, batch=8).step()
        # the batch the dead step held is finished by this step, unless it had released it
        assert result.resumed == (0 if point == "released" else 1), point
        source = admin.namespace.entity(point)
        assert source.counts()["total"] == 0, point  # nothing left behind
        ids = [r[0] for r in admin.namespace.entity(f"to-{point}").messages()
               .select("message_id").collect()]
        assert len(ids) == len(set(ids)) == MESSAGES, (point, sorted(ids))
        delivered += ids
    assert sorted(delivered) == expected
