"""Issue 22 point 3: ``spark.read.format("sbqueue")`` against the entity's SQL view and a
raw Delta read of its inbox, in the same run.

A queue of ``--messages`` messages on 16 partitions, a tenth received (locked) and a
tenth of those completed. Each round, interleaved, counted:

- ``raw``: the inbox read as a Delta table (what Delta gives);
- ``view``: the entity's messages through its view (``Entity.messages()``);
- ``source``: ``spark.read.format("sbqueue")`` (the view rebuilt by the source);
- ``source_one``: the same with ``partition_id = 0`` (one input partition read);
- ``view_one``: the view with ``partition_id = 0``.

    python benchmarks/batch_source.py [--reps 5] [--messages 2000]

Results: ``benchmarks/results/batch_source-<date>.jsonl``.
"""

from __future__ import annotations

import argparse
from typing import Any

from commit_cost import _interleaved
from common import run_parts

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.datasource import register
from sbqueue.management import ServiceBusAdministrationClient


def batch_source(spark: Any, root: str, reps: int, messages: int) -> dict[str, Any]:
    register(spark)
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("orders", enable_partitioning=True, lock_duration="PT5M")
    with ServiceBusClient(root, spark=spark) as client:
        sender = client.get_queue_sender("orders")
        for start in range(0, messages, 200):
            sender.send_messages([ServiceBusMessage("x" * 100, partition_key=f"k{i}")
                                  for i in range(start, min(messages, start + 200))])
        with client.get_queue_receiver("orders", max_wait_time=30) as receiver:
            got = receiver.receive_messages(messages // 10)
            for message in got[: len(got) // 10]:
                receiver.complete_message(message)
    entity = Namespace(root, spark).entity("orders")
    source = (spark.read.format("sbqueue").option("namespace", root)
              .option("entity", "orders").load())
    rounds = [(("raw", lambda: entity.inbox.read().count()),
               ("view", lambda: entity.messages().count()),
               ("source", lambda: source.count()),
               ("view_one", lambda: entity.messages().where("partition_id = 0").count()),
               ("source_one", lambda: source.where("partition_id = 0").count()))
              for _ in range(reps)]
    p50, jobs = _interleaved(spark, rounds)
    rows = {"source": source.count(), "view": entity.messages().count()}
    return {"part": "batch_source", "reps": reps, "messages": messages, "rows": rows,
            "p50_s": p50,
            "jobs": jobs, "ratio_to_raw": {k: round(v / p50["raw"], 2)
                                           for k, v in p50.items() if k != "raw"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    run_parts("sbqueue-bench-batch-source", "batch_source",
              {"batch_source": lambda spark, root: batch_source(spark, root, args.reps,
                                                                 args.messages)})


if __name__ == "__main__":
    main()
