"""Spike: in the inbox + ledger layout, which operations conflict with which?

Three rounds, each two threads working at once for ROUNDS operations, with NO retry, so
every Delta conflict is counted:
  A. sends into partition 0 while receives lock partition 0   (send vs receive)
  B. receives on partition 0 and on partition 1 at once         (different partitions)
  C. two receivers on partition 0 at once                        (control: must conflict)

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


def lock_once(queue, partition: int) -> None:  # type: ignore[no-untyped-def]
    from datetime import datetime, timezone

    changes, _ = queue._ingest_and_pick([partition], 1, "peek_lock", datetime.now(timezone.utc))
    if not changes.isEmpty():
        store.guarded_merge(queue.spark, queue.ledger_path, "partition_id", [partition], "key",
                            changes, store_columns())


def store_columns() -> list[str]:
    from sbqueue.engine.schema import LEDGER_COLUMNS

    return LEDGER_COLUMNS


def run_pair(first, second, rounds: int) -> dict[str, int]:  # type: ignore[no-untyped-def]
    outcome = {"ok": 0, "conflicts": 0, "stale": 0}
    lock = threading.Lock()

    def loop(op) -> None:  # type: ignore[no-untyped-def]
        for _ in range(rounds):
            try:
                op()
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
