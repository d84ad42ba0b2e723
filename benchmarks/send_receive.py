"""Benchmark: single-message operations and a 100,000-message DataFrame send.

Prints medians measured side by side in one run, and the ratio of sbqueue's DataFrame send
(validation, routing, one inbox commit) to a raw Delta append of the same rows.

    python benchmarks/send_receive.py [rows] [repeats]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "spikes"))

from common import scratch, session

from sbqueue.engine import Namespace
from sbqueue.management import ServiceBusAdministrationClient


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main(rows: int, repeats: int) -> None:
    spark = session()
    with scratch("bench") as root:
        admin = ServiceBusAdministrationClient(root, spark=spark)
        admin.create_queue("single")
        admin.create_queue("big", enable_partitioning=True)
        ns = Namespace(root, spark)
        single, big = ns.entity("single"), ns.entity("big")

        one = spark.createDataFrame([("hello",)], "body string")
        single.send_dataframe(one)  # warm-up
        single.complete_dataframe(single.receive_dataframe(10).localCheckpoint())
        send_ms, lock_ms, complete_ms = [], [], []
        for _ in range(repeats):
            start = time.perf_counter()
            single.send_dataframe(one)
            send_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            got = single.receive_partitions([0], 1).localCheckpoint()
            got.count()
            lock_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            single.complete_dataframe(got)
            complete_ms.append((time.perf_counter() - start) * 1000)

        df = spark.range(rows).selectExpr(
            "concat('payload-', id, '-', repeat('x', 100)) AS body",
            "IF(id % 3 = 0, concat('s', id % 100), NULL) AS session_id",
            "map('n', concat('i:', CAST(id AS STRING))) AS application_properties",
        ).localCheckpoint()
        df.count()
        raw_path = f"{root}/raw"
        df.limit(1).write.format("delta").save(raw_path)
        big.send_dataframe(df.limit(10))  # warm-up both paths
        ours, raw = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            big.send_dataframe(df)
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            df.write.format("delta").mode("append").save(raw_path)
            raw.append(time.perf_counter() - start)
        print(json.dumps({
            "single_send_ms": round(median(send_ms)),
            "single_lock_ms": round(median(lock_ms)),
            "single_complete_ms": round(median(complete_ms)),
            "rows": rows,
            "sbqueue_send_s": round(median(ours), 2),
            "raw_delta_append_s": round(median(raw), 2),
            "ratio_sbqueue_over_raw": round(median(ours) / median(raw), 2),
            "repeats": repeats,
        }))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000,
         int(sys.argv[2]) if len(sys.argv) > 2 else 5)
