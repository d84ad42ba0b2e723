"""Issue 6 benchmarks, one command: the client beside raw Delta operations and DataFrames.

- single: p50 and p99 of a client send, receive and complete of one message, interleaved
  with a raw single-row Delta append (send) and a raw single-row MERGE (receive, complete);
- loop: receive + complete one message at a time with ``prefetch_count=100``, messages per
  second, beside the DataFrame drain (receive_dataframe + complete_dataframe, 100 a batch)
  of as many messages, rounds interleaved.

    python benchmarks/client.py [--reps 20] [--messages 100] [--rounds 2]

Bodies are 1 KB. Prints one JSON object per part.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from common import measured, run_parts
from delta.tables import DeltaTable

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient

BODY = "x" * 1000


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 3)


def single(spark: Any, root: str, reps: int) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("single", enable_partitioning=True, lock_duration="PT5M")
    client = ServiceBusClient(root, spark=spark)
    sender = client.get_queue_sender("single")
    receiver = client.get_queue_receiver("single", max_wait_time=30)
    raw = f"{root}/raw"
    spark.range(1).selectExpr("id", f"'{BODY}' AS body").write.format("delta").save(raw)

    def raw_merge(i: int) -> None:
        src = spark.range(i, i + 1).selectExpr("id", f"'{BODY}' AS body")
        (DeltaTable.forPath(spark, raw).alias("t").merge(src.alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    times: dict[str, list[float]] = {k: [] for k in (
        "raw_append", "send", "raw_merge", "receive", "complete")}
    jobs: dict[str, int] = {}
    for i in range(reps):
        got: list[Any] = []
        steps = (
            ("raw_append", lambda: spark.range(1).selectExpr("id", f"'{BODY}' AS body")
             .write.format("delta").mode("append").save(raw)),
            ("send", lambda: sender.send_messages(ServiceBusMessage(BODY))),
            ("raw_merge", lambda i=i: raw_merge(i)),
            ("receive", lambda got=got: got.extend(receiver.receive_messages(1))),
            ("raw_merge", lambda i=i: raw_merge(10_000 + i)),
            ("complete", lambda got=got: receiver.complete_message(got[0])),
        )
        for key, fn in steps:
            _, seconds, n = measured(spark, fn)
            times[key].append(seconds)
            jobs[key] = n
    stats = {k: {"p50": _percentile(v, 0.5), "p99": _percentile(v, 0.99)}
             for k, v in times.items()}
    base = {"send": "raw_append", "receive": "raw_merge", "complete": "raw_merge"}
    return {"part": "single", "reps": reps, "seconds": stats, "jobs": jobs, "ratios_p50": {
        f"{k}/{b}": round(stats[k]["p50"] / stats[b]["p50"], 2) for k, b in base.items()}}


def loop(spark: Any, root: str, messages: int, rounds: int) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    client = ServiceBusClient(root, spark=spark)
    totals = {"client": [0, 0.0], "dataframe": [0, 0.0]}
    body = spark.range(messages).selectExpr(f"'{BODY}' AS body")
    for r in range(rounds):
        for face in ("client", "dataframe"):
            name = f"loop-{face}-{r}"
            admin.create_queue(name, enable_partitioning=True, lock_duration="PT5M")
            entity = client.namespace.entity(name)
            entity.send_dataframe(body)
            start, done = time.perf_counter(), 0
            if face == "client":
                with client.get_queue_receiver(name, prefetch_count=100,
                                               max_wait_time=5) as receiver:
                    for message in receiver:
                        receiver.complete_message(message)
                        done += 1
            else:
                while True:
                    batch = entity.receive_dataframe(100).localCheckpoint()
                    settled = entity.complete_dataframe(batch).settled
                    if not settled:
                        break
                    done += settled
            totals[face][0] += done
            totals[face][1] += time.perf_counter() - start
    rates = {k: round(n / s, 2) for k, (n, s) in totals.items()}
    return {"part": "loop", "messages_per_round": messages, "rounds": rounds,
            "messages": {k: v[0] for k, v in totals.items()},
            "messages_per_s": rates,
            "ratio_client/dataframe": round(rates["client"] / rates["dataframe"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="single,loop")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    run_parts("sbqueue-bench-client", args.parts, {
        "single": lambda spark, root: single(spark, root, args.reps),
        "loop": lambda spark, root: loop(spark, root, args.messages, args.rounds),
    })


if __name__ == "__main__":
    main()
