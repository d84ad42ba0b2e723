"""The SDK's peek sample, as a user runs it: ``python exit_program.py ROOT``.

Opens a client on the local namespace ``ROOT`` (a connection string naming the folder),
peeks two messages of queue ``orders``, prints them and returns. Issue 41 item 5: such a
program printed the right output, then aborted at exit ("terminate called without an
active exception", exit status 134) one run in three to six: Arrow's worker threads were
still releasing the Python buffers of a driver read when the interpreter finalized
(decision 033). ``test_exit`` runs it 30 times in a row and wants exit status 0 each time.
"""

from __future__ import annotations

import sys

from sbqueue import ServiceBusClient


def main(root: str) -> None:
    client = ServiceBusClient.from_connection_string(
        f"Endpoint={root};SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=x")
    with client:
        receiver = client.get_queue_receiver(queue_name="orders")
        with receiver:
            for message in receiver.peek_messages(max_message_count=2):
                print(f"exit-program: {message}")


if __name__ == "__main__":
    main(sys.argv[1])
