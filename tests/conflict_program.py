"""A user's program whose threads conflict: four session workers on a one-partition queue.

Run by ``tests/integration/test_quiet_conflicts.py`` in its own process with stderr
captured. sbqueue retries the Delta conflicts among the workers; the program's output must
show none of them (issue 17). Handled conflicts go to ``logging`` at DEBUG (here to a file
given as the second argument) and are counted; the count is printed last.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import threading

from sbqueue import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage
from sbqueue.exceptions import MessageLockLostError, OperationTimeoutError, SessionLockLostError
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store.guarded import conflicts_retried


def worker(client: ServiceBusClient) -> None:
    while True:
        try:
            receiver = client.get_queue_receiver("pool", session_id=NEXT_AVAILABLE_SESSION,
                                                 max_wait_time=3)
            receiver.__enter__()
        except OperationTimeoutError:
            return
        with receiver:
            try:
                while batch := receiver.receive_messages(10, max_wait_time=1):
                    for message in batch:
                        receiver.complete_message(message)
            except (SessionLockLostError, MessageLockLostError):
                continue  # slow commits (the commit-cost issue): the session comes back


def main(log_file: str) -> None:
    logging.basicConfig(filename=log_file, level=logging.DEBUG)
    folder = tempfile.mkdtemp()
    admin = ServiceBusAdministrationClient(folder)
    admin.create_queue("pool", requires_session=True)
    client = ServiceBusClient(folder, spark=admin.namespace.spark)
    with client.get_queue_sender("pool") as sender:
        sender.send_messages([ServiceBusMessage(f"{i}", session_id=f"s{i % 6}")
                              for i in range(24)])
    threads = [threading.Thread(target=worker, args=(client,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"conflicts retried: {conflicts_retried()}")


if __name__ == "__main__":
    main(sys.argv[1])
