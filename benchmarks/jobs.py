"""Issue 9 benchmark, one command: forwarding throughput and maintenance time by size.

forward   100,000 messages moved queue to queue by forwarding steps (claim, idempotent
          append, release per batch), beside a raw Delta append of the same rows, in each
          rep (interleaved); medians: messages per second and the ratio to the append.
maintain  one maintenance step (expire and advance, segments, ledger compaction, vacuum)
          of a queue holding 10,000 / 100,000 / 1,000,000 messages (half of them received
          and completed), beside a raw Delta scan of its inbox (count) of the same size.

    python benchmarks/jobs.py [--messages 100000] [--reps 3] [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from common import measured, median

from sbqueue import Namespace
from sbqueue.engine.forward.job import Forwarder
from sbqueue.engine.maintain.job import Maintainer
from sbqueue.management import ServiceBusAdministrationClient

RESULTS = Path(__file__).resolve().parent / "results"


def _rows(spark: Any, n: int) -> Any:
    return spark.range(n).selectExpr(
        "concat('message ', CAST(id AS STRING), repeat('x', 100)) AS body").localCheckpoint()


def forward(spark: Any, root: str, messages: int, reps: int) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    rows = _rows(spark, messages)
    rows.count()
    times: dict[str, list[float]] = {"raw": [], "forward": []}
    jobs: dict[str, int] = {}
    for rep in range(reps):  # interleaved: each rep runs both
        admin.create_queue(f"dst{rep}", enable_partitioning=True)
        admin.create_queue(f"src{rep}", enable_partitioning=True, forward_to=f"dst{rep}")
        ns = Namespace(root, spark)
        ns.entity(f"src{rep}").send_dataframe(rows)
        _, seconds, n = measured(spark, lambda rep=rep: rows.write.format("delta")
                                 .mode("append").save(f"{root}/raw{rep}"))
        times["raw"].append(seconds)
        jobs["raw"] = n
        result, seconds, n = measured(
            spark, lambda rep=rep, ns=ns: Forwarder(ns, f"src{rep}").step())
        assert result.forwarded == messages, result
        times["forward"].append(seconds)
        jobs["forward"] = n
    p50 = {k: median(v) for k, v in times.items()}
    return {"part": "forward", "messages": messages, "reps": reps,
            "raw_append_p50_s": round(p50["raw"], 2), "raw_jobs": jobs["raw"],
            "forward_p50_s": round(p50["forward"], 2), "forward_jobs": jobs["forward"],
            "forward_messages_per_s": round(messages / p50["forward"]),
            "raw_messages_per_s": round(messages / p50["raw"]),
            "vs_raw_append": round(p50["forward"] / p50["raw"], 2)}


def maintain(spark: Any, root: str, sizes: list[int], reps: int) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    ns = Namespace(root, spark)
    curve = []
    for size in sizes:
        admin.create_queue(f"q{size}", enable_partitioning=True)
        queue = ns.entity(f"q{size}")
        queue.send_dataframe(_rows(spark, size))
        got = queue.receive_dataframe(size // 2).localCheckpoint()
        queue.complete_dataframe(got)
        times: dict[str, list[float]] = {"scan": [], "maintain": []}
        for _ in range(reps):
            _, seconds, _ = measured(spark, lambda q=queue: spark.read.format("delta")
                                     .load(q.inbox_path).count())
            times["scan"].append(seconds)
            _, seconds, n = measured(spark, lambda p=queue.path: Maintainer(ns).maintain(p))
            times["maintain"].append(seconds)
        scan, step = median(times["scan"]), median(times["maintain"])
        curve.append({"messages": size, "maintain_p50_s": round(step, 2), "jobs": n,
                      "inbox_scan_p50_s": round(scan, 2), "vs_scan": round(step / scan, 1)})
    return {"part": "maintain", "reps": reps, "curve": curve}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--parts", default="forward,maintain")
    args = parser.parse_args()
    from sbqueue.spark import get_session

    spark = get_session("sbqueue-bench-jobs")
    root = tempfile.mkdtemp(prefix="sbq-bench-jobs-")
    date = datetime.date.today().isoformat()
    try:
        for part in args.parts.split(","):
            if part == "forward":
                report = forward(spark, f"{root}/f", args.messages, args.reps)
            else:
                report = maintain(spark, f"{root}/m",
                                  [int(s) for s in args.sizes.split(",")], args.reps)
            report["date"] = date
            print(json.dumps(report), flush=True)
            with open(RESULTS / f"jobs-{date}.jsonl", "a") as out:
                out.write(json.dumps(report) + "\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
