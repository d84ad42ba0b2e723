"""S12.2 under a crash: a child process (its own JVM) is killed with SIGKILL at each step
of a transaction's commit path, and what it leaves is checked from outside.

The transaction completes the message it received and sends three. Steps: before the
append (nothing written), after the append before the commit (the messages are written,
uncommitted), during the commit (killed 0.8 s into the MERGE), after the commit before the
caller returns. Each must leave all of the transaction or none of it, and once the dead
holder's lock expires (the engine's clock is moved past it) every message is received
exactly once.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STEPS = ("before_append", "before_commit", "during_commit", "after_commit")
SENT = ["t0", "t1", "t2"]
LOCK_SECONDS = 90  # a cold JVM on a loaded machine: the child needs its lock a while

CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading
    import sbqueue.client.transaction as transaction
    from sbqueue import ServiceBusClient, ServiceBusMessage
    root, queue, step = sys.argv[1], sys.argv[2], sys.argv[3]
    real = transaction.commit_transaction

    def kill():
        os.kill(os.getpid(), signal.SIGKILL)

    def hook(name):
        if name == step:
            if name == "during_commit":
                threading.Timer(0.8, kill).start()  # inside the MERGE
            else:
                kill()

    transaction.commit_transaction = lambda entity, plan: real(entity, plan, crash=hook)
    client = ServiceBusClient(root)
    with client.get_queue_receiver(queue, max_wait_time=60) as receiver, \\
            client.get_queue_sender(queue) as sender:
        got = receiver.receive_messages(1)
        with client.transaction() as tx:
            tx.complete_message(receiver, got[0])
            tx.send_messages(sender, [ServiceBusMessage(f"t{i}") for i in range(3)])
    print("returned", flush=True)
    """
)


def test_s12_2_a_killed_commit_leaves_all_or_nothing(clock, admin, spark, namespace_root,
                                                     tmp_path) -> None:
    with ServiceBusClient(namespace_root, spark=spark) as client:
        for step in STEPS:
            admin.create_queue(step, lock_duration=timedelta(seconds=LOCK_SECONDS))
            client.get_queue_sender(step).send_messages(ServiceBusMessage("m0"))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    for step in STEPS:  # one at a time: a cold JVM each is slow enough on two cores
        proc = subprocess.run([sys.executable, str(script), namespace_root, step, step],
                              capture_output=True, text=True, timeout=900, check=False)
        assert proc.returncode == -9, (step, proc.stdout, proc.stderr[-3000:])  # killed
    # Every dead holder's lock has ended: its stored time adds the commit grace the
    # child measured, so move past the duration twice.
    clock.advance(2 * LOCK_SECONDS)
    outcomes = {}
    with ServiceBusClient(namespace_root, spark=spark) as client:
        for step in STEPS:
            entity = client.namespace.entity(step)
            seen = sorted(bytes(r.body).decode() for r in entity.messages().collect())
            assert seen in (["m0"], SENT), (step, seen)  # all of it or none of it
            received: list[str] = []
            with client.get_queue_receiver(step, max_wait_time=3) as receiver:
                for _ in range(len(seen)):
                    batch = receiver.receive_messages(10)
                    received += [str(m) for m in batch]
                    for message in batch:
                        receiver.complete_message(message)
                    if len(received) >= len(seen):
                        break
                received += [str(m) for m in receiver.receive_messages(10)]  # nothing more
            assert sorted(received) == seen, (step, received)  # each exactly once
            outcomes[step] = seen
    assert outcomes["before_append"] == ["m0"]
    assert outcomes["before_commit"] == ["m0"]
    assert outcomes["after_commit"] == SENT
