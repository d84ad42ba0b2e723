"""Creating entities: ``create_queue``, ``create_topic`` and ``create_subscription`` with
their tables made on the driver (decision 026) and with Spark's ``CREATE TABLE``
(``SBQUEUE_DRIVER_COMMITS=0``), beside a raw Delta ``CREATE TABLE`` and a raw 1-row append,
interleaved round by round; medians, Spark jobs, and ratios to the raw create.

    python3 benchmarks/admin_create.py --reps 7
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from common import Timings, run_parts

_SWITCH = "SBQUEUE_DRIVER_COMMITS"


def create(spark: Any, root: str, reps: int) -> dict[str, Any]:
    from sbqueue.management import ServiceBusAdministrationClient

    admin = ServiceBusAdministrationClient(f"{root}/ns", spark=spark)
    record = Timings(spark)
    timed = record.timed
    row = spark.range(1).selectExpr("id", "'x' AS body")

    admin.create_queue("warm-up")  # the first create pays the JVM's warm-up
    for i in range(reps):
        timed("raw_create_table", lambda i=i: spark.sql(
            f"CREATE TABLE delta.`{root}/raw/t{i}` (id BIGINT, body STRING) USING delta"))
        timed("raw_append", lambda: row.write.format("delta").mode("append")
              .save(f"{root}/raw/append"))
        for how in ("driver", "spark"):
            before = os.environ.get(_SWITCH)
            os.environ[_SWITCH] = "1" if how == "driver" else "0"
            try:
                timed(f"create_queue_{how}", lambda i=i, how=how: admin.create_queue(
                    f"q-{how}-{i}", enable_partitioning=True))
                timed(f"create_topic_{how}", lambda i=i, how=how: admin.create_topic(
                    f"t-{how}-{i}"))
                timed(f"create_subscription_{how}", lambda i=i, how=how: admin
                      .create_subscription(f"t-{how}-{i}", "s"))
            finally:
                if before is None:
                    os.environ.pop(_SWITCH, None)
                else:
                    os.environ[_SWITCH] = before
    med, jobs = record.medians(), record.jobs
    return {"part": "create", "reps": reps, "median_s": med, "jobs": jobs,
            "ratios": {f"{k}/raw_create_table": round(v / med["raw_create_table"], 2)
                       for k, v in med.items() if k.startswith("create_")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    run_parts("sbqueue-bench-create", "create",
              {"create": lambda spark, root: create(spark, root, args.reps)})


if __name__ == "__main__":
    main()
