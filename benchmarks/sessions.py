"""Issue 7 benchmarks, one command: session throughput and transaction commits.

- pool: 10 sessions x 20 messages through 5 worker threads taking NEXT_AVAILABLE_SESSION
  (receive-and-delete, 10 a receive) until none is left, messages per second, on a queue
  with 1, 4 (a Premium namespace of 4 partitions) and 16 partitions;
- transaction: p50 of a transaction (complete 1 received message + send 1) beside a plain
  send + complete of the same messages, interleaved.

    python benchmarks/sessions.py [--parts pool,transaction] [--reps 10] [--rounds 1]

Bodies are 1 KB. Prints one JSON object per part.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from common import measured, median, run_parts

from sbqueue import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
)
from sbqueue.exceptions import OperationTimeoutError
from sbqueue.management import ServiceBusAdministrationClient

BODY = "x" * 1000
SESSIONS, PER_SESSION, WORKERS = 10, 20, 5


def _pool_once(spark: Any, root: str, partitions: int) -> dict[str, Any]:
    """One worker-pool run; every message received once, in order, or it raises."""
    if partitions == 4:
        ServiceBusAdministrationClient.create_namespace(root, sku="Premium",
                                                        messaging_partitions=4, spark=spark)
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("pool", requires_session=True, enable_partitioning=partitions > 1)
    client = ServiceBusClient(root, spark=spark)
    client.get_queue_sender("pool").send_messages(
        [ServiceBusMessage(f"s{s}-{i:02d}-{BODY}", session_id=f"s{s}")
         for i in range(PER_SESSION) for s in range(SESSIONS)])
    got: dict[str, list[str]] = {f"s{s}": [] for s in range(SESSIONS)}
    guard = threading.Lock()
    last = [0.0]  # the last message's arrival: a worker's final wait for a session that
    # never comes (max_wait_time) is idle time, not the pool's

    def worker() -> None:
        while True:
            try:
                receiver = client.get_queue_receiver(
                    "pool", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=3,
                    receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE)
                receiver.__enter__()
            except OperationTimeoutError:
                return
            with receiver:
                sid = receiver.session.session_id
                while batch := receiver.receive_messages(10, max_wait_time=1):
                    with guard:
                        got[sid] += [str(m).rsplit("-", 1)[0] for m in batch]
                        last[0] = time.perf_counter()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = last[0] - started
    for sid, bodies in got.items():
        expected = [f"{sid}-{i:02d}" for i in range(PER_SESSION)]
        if bodies != expected:
            raise AssertionError(f"{sid}: {bodies}")
    return {"seconds": round(seconds, 1),
            "messages_per_s": round(SESSIONS * PER_SESSION / seconds, 2)}


def pool(spark: Any, root: str, rounds: int) -> dict[str, Any]:
    runs: dict[int, list[dict[str, Any]]] = {1: [], 4: [], 16: []}
    for r in range(rounds):
        for partitions in runs:  # interleaved
            runs[partitions].append(_pool_once(spark, f"{root}/{partitions}-{r}", partitions))
    rates = {p: median([x["messages_per_s"] for x in v]) for p, v in runs.items()}
    return {"part": "pool", "sessions": SESSIONS, "per_session": PER_SESSION,
            "workers": WORKERS, "runs": {str(p): v for p, v in runs.items()},
            "messages_per_s": {str(p): r for p, r in rates.items()},
            "ratio_16/1": round(rates[16] / rates[1], 2),
            "ratio_4/1": round(rates[4] / rates[1], 2)}


def transaction(spark: Any, root: str, reps: int) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("tx", enable_partitioning=True, lock_duration="PT5M")
    client = ServiceBusClient(root, spark=spark)
    sender = client.get_queue_sender("tx")
    receiver = client.get_queue_receiver("tx", max_wait_time=30)
    sender.send_messages([ServiceBusMessage(BODY, partition_key="k") for _ in range(2 * reps)])
    times: dict[str, list[float]] = {"transaction": [], "send+complete": []}
    jobs: dict[str, list[int]] = {"transaction": [], "send+complete": []}

    def in_transaction() -> None:
        [message] = receiver.receive_messages(1)
        _, seconds, n = measured(spark, lambda: _commit(client, sender, receiver, message))
        times["transaction"].append(seconds)
        jobs["transaction"].append(n)

    def plain() -> None:
        [message] = receiver.receive_messages(1)

        def both() -> None:
            sender.send_messages(ServiceBusMessage(BODY, partition_key="k"))
            receiver.complete_message(message)

        _, seconds, n = measured(spark, both)
        times["send+complete"].append(seconds)
        jobs["send+complete"].append(n)

    for _ in range(reps):
        in_transaction()
        plain()
    p50 = {k: round(median(v), 3) for k, v in times.items()}
    return {"part": "transaction", "reps": reps, "p50_s": p50,
            "jobs_median": {k: median([float(x) for x in v]) for k, v in jobs.items()},
            "ratio_transaction/plain": round(p50["transaction"] / p50["send+complete"], 2)}


def _commit(client: Any, sender: Any, receiver: Any, message: Any) -> None:
    with client.transaction() as tx:
        tx.complete_message(receiver, message)
        tx.send_messages(sender, ServiceBusMessage(BODY, partition_key="k"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="pool,transaction")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    run_parts("sbqueue-bench-sessions", args.parts, {
        "pool": lambda spark, root: pool(spark, root, args.rounds),
        "transaction": lambda spark, root: transaction(spark, root, args.reps),
    })


if __name__ == "__main__":
    main()
