"""A program that returns while its ``AutoLockRenewer`` is renewing and was never closed:
``python renewer_exit_program.py SCRATCH``.

The renewer's thread is a daemon: without the exit hook of ``client.lock_renewer`` the
interpreter finalizes while that thread is inside a Delta commit (delta-rs, Arrow), and
the thread taking the GIL back there crashes the process (SIGSEGV or SIGABRT; decision
033). The receiver is a stand-in whose renewal is what a real one's is on a local folder,
Delta commits made by delta-rs, without a SparkSession; prints ``renewer-exit: renewing``
once its first renewal is well under way, then returns at once.
"""

from __future__ import annotations

import sys
import threading
from datetime import timedelta
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from sbqueue import AutoLockRenewer, ServiceBusReceivedMessage
from sbqueue.core.clock import utcnow


class _Receiver:
    lock_duration = timedelta(seconds=60)

    def __init__(self, table: str) -> None:
        self.table = table
        self.renewing = threading.Event()

    def renew_message_locks(self, messages: list[Any]) -> dict[int, Exception]:
        rows = pa.table({"n": list(range(1000))})
        for commit in range(40):  # a renewal's commits, under way when main returns
            write_deltalake(self.table, rows, mode="append")
            if commit == 5:
                self.renewing.set()
        return {}


def main(scratch: str) -> None:
    receiver = _Receiver(scratch)
    message = ServiceBusReceivedMessage(b"x", broker={
        "sequence_number": 1, "lock_token": "t", "locked_until_utc": utcnow()})  # due now
    renewer = AutoLockRenewer()  # left open, as a program that forgets close() leaves it
    renewer.register(receiver, message)  # type: ignore[arg-type]
    assert receiver.renewing.wait(60), "the renewal never started"
    print("renewer-exit: renewing")


if __name__ == "__main__":
    main(sys.argv[1])
