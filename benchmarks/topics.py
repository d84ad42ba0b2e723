"""Issue 8 benchmark, one command: topic fan-out as the subscriptions grow.

A DataFrame send of 100,000 messages to a topic with 1, 10 and 100 subscriptions, each with
a SQL filter matching about half of them (``(n + i) % 2 = 0``), beside a raw Delta append of
the same rows and a send to a plain queue, interleaved, medians reported: messages per
second, copies per second, and the cost per message relative to one subscription. The
curve is printed and, when matplotlib is installed (``pip install -e ".[bench]"``), plotted
to ``benchmarks/results/topics-<date>.png``.

    python benchmarks/topics.py [--messages 100000] [--reps 3] [--subs 1,10,100]
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
from sbqueue.management import RuleProperties, ServiceBusAdministrationClient, SqlRuleFilter

RESULTS = Path(__file__).resolve().parent / "results"


def _rows(spark: Any, n: int) -> Any:
    return spark.range(n).selectExpr(
        "concat('message ', CAST(id AS STRING), repeat('x', 100)) AS body",
        "named_struct('n', id) AS application_properties").localCheckpoint()


def _setup(spark: Any, root: str, subs: list[int]) -> Namespace:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("plain", enable_partitioning=True)
    for count in subs:
        admin.create_topic(f"t{count}", enable_partitioning=True)
        for i in range(count):
            admin.create_subscription(f"t{count}", f"s{i}", default_rule=RuleProperties(
                "half", SqlRuleFilter(f"(n + {i}) % 2 = 0")))
    return Namespace(root, spark)


def run(messages: int, reps: int, subs: list[int]) -> dict[str, Any]:
    from sbqueue.spark import get_session

    spark = get_session("sbqueue-bench-topics")
    root = tempfile.mkdtemp(prefix="sbq-bench-topics-")
    try:
        ns = _setup(spark, root, subs)
        rows = _rows(spark, messages)
        rows.count()
        raw_path = f"{root}/raw"
        from sbqueue.engine.send.frame import prepare_send

        prepared = prepare_send(rows, ns.catalog.get_queue("plain")).localCheckpoint()
        times: dict[str, list[float]] = {"raw": [], "queue": [],
                                         **{f"topic{c}": [] for c in subs}}
        jobs: dict[str, int] = {}
        copies: dict[str, int] = {}
        for _ in range(reps):  # interleaved: each rep runs every subject once
            _, seconds, n = measured(spark, lambda: prepared.write.format("delta")
                                     .mode("append").save(raw_path))
            times["raw"].append(seconds)
            jobs["raw"] = n
            _, seconds, n = measured(spark, lambda: ns.entity("plain").send_dataframe(rows))
            times["queue"].append(seconds)
            jobs["queue"] = n
            for count in subs:
                result, seconds, n = measured(
                    spark, lambda count=count: ns.topic(f"t{count}").send_dataframe(rows))
                times[f"topic{count}"].append(seconds)
                jobs[f"topic{count}"] = n
                copies[f"topic{count}"] = result.count
        p50 = {k: median(v) for k, v in times.items()}
        curve = []
        for count in subs:
            key = f"topic{count}"
            held = copies[key]
            curve.append({
                "subscriptions": count, "p50_s": round(p50[key], 2), "jobs": jobs[key],
                "rows_stored": held, "copies": count * messages // 2,
                "messages_per_s": round(messages / p50[key]),
                "copies_per_s": round(count * messages / 2 / p50[key]),
                "vs_raw_append": round(p50[key] / p50["raw"], 2),
                "vs_queue_send": round(p50[key] / p50["queue"], 2),
                "cost_vs_1_subscription": round(p50[key] / p50[f"topic{subs[0]}"], 2),
            })
        return {"part": "fan_out", "messages": messages, "reps": reps,
                "raw_append_p50_s": round(p50["raw"], 2), "raw_jobs": jobs["raw"],
                "queue_send_p50_s": round(p50["queue"], 2), "queue_jobs": jobs["queue"],
                "curve": curve, "date": datetime.date.today().isoformat()}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def plot(report: dict[str, Any]) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    curve = report["curve"]
    subs = [c["subscriptions"] for c in curve]
    fig, left = plt.subplots(figsize=(7, 4))
    left.plot(subs, [c["p50_s"] for c in curve], "o-", label="topic send p50 (s)")
    left.axhline(report["queue_send_p50_s"], linestyle="--", color="grey",
                 label="queue send p50 (s)")
    left.set_xscale("log")
    left.set_xlabel("subscriptions (each matching half)")
    left.set_ylabel(f"seconds per send of {report['messages']} messages")
    right = left.twinx()
    right.plot(subs, [c["copies_per_s"] for c in curve], "s-", color="tab:green",
               label="copies per second")
    right.set_ylabel("copies per second")
    left.legend(loc="upper left")
    right.legend(loc="lower right")
    left.set_title("sbqueue topic fan-out: one commit per send")
    path = RESULTS / f"topics-{report['date']}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--subs", default="1,10,100")
    args = parser.parse_args()
    report = run(args.messages, args.reps, [int(s) for s in args.subs.split(",")])
    print(json.dumps(report), flush=True)
    with open(RESULTS / f"topics-{report['date']}.jsonl", "a") as out:
        out.write(json.dumps(report) + "\n")
    print(f"{'subscriptions':>13} {'p50 s':>7} {'msg/s':>8} {'copies/s':>9} {'cost x':>7}")
    for c in report["curve"]:
        print(f"{c['subscriptions']:>13} {c['p50_s']:>7} {c['messages_per_s']:>8} "
              f"{c['copies_per_s']:>9} {c['cost_vs_1_subscription']:>7}")
    path = plot(report)
    if path is not None:
        print(f"plot: {path}")


if __name__ == "__main__":
    main()
