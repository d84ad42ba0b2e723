"""Three processes sending to one queue at once, and a drain of it: the race a store's
put-if-absent must win once per version (issue 44: S3 and Azure Blob alike)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

SENDER = textwrap.dedent("""
    import sys
    from sbqueue import ServiceBusClient, ServiceBusMessage
    root, who = sys.argv[1], sys.argv[2]
    with ServiceBusClient(root).get_queue_sender("q") as sender:
        for i in range(10):
            sender.send_messages([ServiceBusMessage(f"{who}-{i}-{k}") for k in range(3)])
""")
EXPECTED = sorted(f"p{n}-{i}-{k}" for n in range(3) for i in range(10) for k in range(3))


def send_from_three_processes(root: str, folder: Path) -> None:
    """Three processes send 10 batches of 3 each to queue ``q`` of ``root`` at once."""
    script = folder / "sender.py"
    script.write_text(SENDER)
    procs = [subprocess.Popen([sys.executable, str(script), root, f"p{n}"],
                              stderr=subprocess.PIPE) for n in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err.decode()[-2000:]


def drain(root: str, spark: Any = None) -> list[str]:
    """Receive and complete every message of queue ``q``; their bodies, in order. Ten at a
    time: a queue with a 5 s lock must see each batch completed within it on a busy
    machine."""
    from sbqueue import ServiceBusClient

    bodies: list[str] = []
    with ServiceBusClient(root, spark=spark).get_queue_receiver(
            "q", max_wait_time=5) as receiver:
        while batch := receiver.receive_messages(10):
            bodies += [str(m) for m in batch]
            for m in batch:
                receiver.complete_message(m)
    return bodies
