"""One maintenance step (``Maintainer.run`` of one queue, no vacuum) beside a raw 1-row
Delta append, interleaved; medians and Spark jobs. Each round first sends a few messages,
so the step has cursors to move. Run it on two checkouts to compare them (decision 021):

    PYTHONPATH=. python3 benchmarks/maintain_step.py --reps 7
"""

from __future__ import annotations

import argparse
from typing import Any

from common import Timings, run_parts


def step(spark: Any, root: str, reps: int) -> dict[str, Any]:
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.engine.maintain.job import Maintainer
    from sbqueue.management import ServiceBusAdministrationClient

    admin = ServiceBusAdministrationClient(f"{root}/ns", spark=spark)
    admin.create_queue("q", enable_partitioning=True)
    record = Timings(spark)
    row = spark.range(1).selectExpr("id", "'x' AS body")
    with ServiceBusClient(f"{root}/ns", spark=spark) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages([ServiceBusMessage(f"m{i}", partition_key=f"k{i % 7}")
                              for i in range(200)])
        with client.get_queue_receiver("q") as receiver:
            for message in receiver.receive_messages(50):
                receiver.complete_message(message)
        maintainer = Maintainer(admin.namespace, vacuum=False)
        maintainer.run(["q"])  # warm-up
        for i in range(reps):
            sender.send_messages([ServiceBusMessage(f"r{i}-{k}", partition_key=f"k{k}")
                                  for k in range(16)])
            record.timed("raw_append", lambda: row.write.format("delta").mode("append")
                         .save(f"{root}/raw"))
            record.timed("maintain_step", lambda: maintainer.run(["q"]))
    med = record.medians()
    return {"part": "maintain", "reps": reps, "median_s": med, "jobs": record.jobs,
            "ratios": {"maintain_step/raw_append": round(
                med["maintain_step"] / med["raw_append"], 2)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    run_parts("sbqueue-bench-maintain", "maintain",
              {"maintain": lambda spark, root: step(spark, root, args.reps)})


if __name__ == "__main__":
    main()
