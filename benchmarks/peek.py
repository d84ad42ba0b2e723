"""The client's ``peek_messages`` read on the driver (decision 026) and what it ran before
(``peek_dataframe(...).collect()``, the SQL view sorted and cut in Spark), beside a raw
Delta read of 10 inbox rows and a raw 1-row append, interleaved; medians, Spark jobs,
ratios to the raw read.

    python3 benchmarks/peek.py --reps 7 --messages 1000
"""

from __future__ import annotations

import argparse
from typing import Any

from common import Timings, run_parts


def peek(spark: Any, root: str, reps: int, messages: int) -> dict[str, Any]:
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.management import ServiceBusAdministrationClient

    admin = ServiceBusAdministrationClient(f"{root}/ns", spark=spark)
    admin.create_queue("q", enable_partitioning=True)
    entity = admin.namespace.entity("q")
    inbox = entity.inbox.path
    record = Timings(spark)
    timed = record.timed
    row = spark.range(1).selectExpr("id", "'x' AS body")

    with ServiceBusClient(f"{root}/ns", spark=spark) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(f"m{i}", partition_key=f"k{i % 7}") for i in range(messages)])
        receiver = client.get_queue_receiver("q")
        receiver.peek_messages(10)  # warm-up
        for _ in range(reps):
            timed("raw_read_10", lambda: spark.read.format("delta").load(inbox).limit(10)
                  .collect())
            timed("raw_append", lambda: row.write.format("delta").mode("append")
                  .save(f"{root}/raw"))
            timed("peek_10_driver", lambda: client.get_queue_receiver("q").peek_messages(10))
            # what the client's peek ran before: the view's rows sorted and cut in Spark
            timed("peek_10_view", lambda: entity.peek_dataframe(10).collect())
    med, jobs = record.medians(), record.jobs
    return {"part": "peek", "reps": reps, "messages": messages, "median_s": med, "jobs": jobs,
            "ratios": {f"{k}/raw_read_10": round(v / med["raw_read_10"], 2)
                       for k, v in med.items() if k.startswith("peek_")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    run_parts("sbqueue-bench-peek", "peek",
              {"peek": lambda spark, root: peek(spark, root, args.reps, args.messages)})


if __name__ == "__main__":
    main()
