"""spark-submit job: send N messages to a queue, drain them with DataFrame receives and
completes, print a JSON summary (used by the cluster test and as a smoke test of a cluster).

    spark-submit --master spark://HOST:7077 --properties-file "$(sbqueue spark-conf)" \\
        jobs/roundtrip.py NAMESPACE [MESSAGES] [BATCH]

The session is the one spark-submit configured. The summary names the processes the
tasks ran in, so a caller can check the work was done by executors, not the driver.
"""

from __future__ import annotations

import json
import os
import sys
import time

from sbqueue.engine import Namespace
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.spark import get_session


def main(namespace: str, messages: int, batch: int) -> dict[str, object]:
    spark = get_session("sbqueue-roundtrip")
    admin = ServiceBusAdministrationClient(namespace, spark=spark)
    if admin.namespace.catalog.queue_exists("roundtrip"):
        admin.delete_queue("roundtrip")
    admin.create_queue("roundtrip", enable_partitioning=True)
    queue = Namespace(namespace, spark).entity("roundtrip")
    start = time.perf_counter()
    sent = queue.send_dataframe(spark.range(messages).selectExpr(
        "CAST(id AS STRING) AS body")).count
    received = completed = 0
    while received < sent:
        got = queue.receive_dataframe(batch).localCheckpoint()
        n = got.count()
        if n == 0:
            break
        received += n
        completed += queue.complete_dataframe(got).settled
    workers = spark.range(0, 8, 1, 4).rdd.map(lambda _: os.getpid()).distinct().collect()
    return {"master": spark.sparkContext.master, "driver_pid": os.getpid(),
            "task_pids": sorted(workers), "sent": sent, "received": received,
            "completed": completed, "remaining": queue.counts()["total"],
            "seconds": round(time.perf_counter() - start, 1)}


if __name__ == "__main__":
    args = sys.argv[1:]
    summary = main(args[0] if args else "./sbqueue-data",
                   int(args[1]) if len(args) > 1 else 10_000,
                   int(args[2]) if len(args) > 2 else 5_000)
    print("roundtrip " + json.dumps(summary))
    sys.exit(0 if summary["completed"] == summary["sent"] else 1)
