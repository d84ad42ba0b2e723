"""Spike: in the inbox + ledger layout, which operations conflict with which?

Part 1, scripted worst case (no retry): both operations read first, then both commit.
  A. receive P reads; a send appends into P; receive P commits      -> must succeed
  B. receive P reads; receive Q reads; P commits; Q commits          -> both must succeed
  C. receive P reads twice; first commits; second commits            -> second must abort
     (control: this is the double lock the guard exists to stop)
Part 2, the same pairs run in two threads for ROUNDS rounds (no retry), counting Delta
conflicts, stale-read aborts and messages handed out twice.

    python benchmarks/spikes/layout_conflicts.py [rounds]
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import scratch, session

from sbqueue.engine import Namespace
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store import delta as store


def lock_once(queue, partition: int) -> list[int]:  # type: ignore[no-untyped-def]
    """One receive of one message, without retry; returns the sequence numbers handed out."""
    from datetime import datetime, timezone

    changes, handed = queue._ingest_and_pick([partition], 1, "peek_lock",
                                             datetime.now(timezone.utc))
    if not changes.isEmpty():
        store.guarded_merge(queue.spark, queue.ledger_path, "partition_id", [partition], "key",
                            changes, store_columns())
    return [r[0] for r in handed.select("sequence_number").collect()]


def scripted(queue, spark, p0: int, p1: int) -> dict[str, str]:  # type: ignore[no-untyped-def]
    from datetime import datetime, timezone

    def pick(partition: int):  # type: ignore[no-untyped-def]
        return queue._ingest_and_pick([partition], 1, "peek_lock", datetime.now(timezone.utc))

    def commit(partition: int, changes) -> str:  # type: ignore[no-untyped-def]
        try:
            store.guarded_merge(spark, queue.ledger_path, "partition_id", [partition], "key",
                                changes, store_columns())
            return "committed"
        except store.StaleRead:
            return "aborted (stale read)"
        except store.DELTA_CONFLICTS as exc:
            return f"aborted ({exc.__class__.__name__})"

    out = {}
    changes, _ = pick(p0)
    queue.send_dataframe(spark.range(5).selectExpr("'x' AS body", "'k0' AS partition_key"))
    out["A receive P after a concurrent send into P"] = commit(p0, changes)
    first, _ = pick(p0)
    second, _ = pick(p1)
    out["B receive P"] = commit(p0, first)
    out["B receive Q (read before P committed)"] = commit(p1, second)
    first, _ = pick(p0)
    second, _ = pick(p0)
    out["C first receive P"] = commit(p0, first)
    out["C second receive P (read before the first committed)"] = commit(p0, second)
    return out


def store_columns() -> list[str]:
    from sbqueue.engine.schema import LEDGER_COLUMNS

    return LEDGER_COLUMNS


def run_pair(first, second, rounds: int) -> dict[str, int]:  # type: ignore[no-untyped-def]
    outcome = {"ok": 0, "conflicts": 0, "stale": 0, "handed_twice": 0}
    lock = threading.Lock()
    barrier = threading.Barrier(2)
    handed: list[int] = []

    def loop(op) -> None:  # type: ignore[no-untyped-def]
        for _ in range(rounds):
            barrier.wait()  # both operations of a round start together
            try:
                got = op()
                with lock:
                    handed.extend(got or [])
                key = "ok"
            except store.StaleRead:
                key = "stale"
            except store.DELTA_CONFLICTS:
                key = "conflicts"
            with lock:
                outcome[key] += 1

    threads = [threading.Thread(target=loop, args=(op,)) for op in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outcome["handed_twice"] = len(handed) - len(set(handed))
    return outcome


def main(rounds: int) -> None:
    spark = session()
    with scratch("conflicts") as root:
        admin = ServiceBusAdministrationClient(root, spark=spark)
        admin.create_queue("q", enable_partitioning=True)
        queue = Namespace(root, spark).entity("q")
        keyed = spark.range(400).selectExpr("CAST(id AS STRING) AS body",
                                            "IF(id % 2 = 0, 'k0', 'k1') AS partition_key")
        queue.send_dataframe(keyed)
        from sbqueue.core.routing import partition_for

        p0, p1 = partition_for("k0", 16), partition_for("k1", 16)
        queue.ingest()

        def send_p0() -> None:
            queue.send_dataframe(spark.range(5).selectExpr("'x' AS body", "'k0' AS partition_key"))

        print(json.dumps(scripted(queue, spark, p0, p1), indent=1))
        results = {
            "A send P vs receive P": run_pair(send_p0, lambda: lock_once(queue, p0), rounds),
            "B receive P vs receive Q": run_pair(lambda: lock_once(queue, p0),
                                                 lambda: lock_once(queue, p1), rounds),
            "C receive P vs receive P (control)": run_pair(lambda: lock_once(queue, p0),
                                                           lambda: lock_once(queue, p0), rounds),
        }
        for name, outcome in results.items():
            print(json.dumps({"case": name, "operations": 2 * rounds, **outcome}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
