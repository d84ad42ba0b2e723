"""Issue 5 benchmarks, one command, every figure a ratio against a peer measured in the
same run (baseline and subject interleaved, medians reported, Spark jobs per operation):

- single: send, receive and complete of one message vs a raw single-row Delta append
  (send) and a raw single-row MERGE (receive, complete);
- backlog: receive 100 + complete on a 16-partition queue holding 1,000 vs BACKLOG messages;
- concurrency: 4 threads (peek-lock 100 + complete) draining MESSAGES from a 16-partition
  queue vs a 1-partition queue: messages per second and the share of aborted commits;
- bulk: a DataFrame send of BULK messages vs a raw Delta append of the same rows, and the
  drain of them (receive_dataframe + complete_dataframe, 100,000 a batch).

    python benchmarks/engine_scale.py [--parts single,backlog,concurrency,bulk]
        [--reps 5] [--backlog 1000000] [--messages 20000] [--bulk 1000000]

Bodies are 1 KB. Prints one JSON object per part.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from common import cpu_ticks, measured, median, run_parts
from delta.tables import DeltaTable

from sbqueue.engine import Namespace
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store.delta import Table

BODY = "repeat('x', 1000)"


def _queue(spark: Any, root: str, name: str, partitioned: bool) -> Any:
    ServiceBusAdministrationClient(root, spark=spark).create_queue(
        name, enable_partitioning=partitioned, lock_duration="PT5M")
    return Namespace(root, spark).entity(name)


def _raw_table(spark: Any, path: str) -> None:
    spark.range(1).selectExpr("id", f"{BODY} AS body").write.format("delta").save(path)


def single(spark: Any, root: str, reps: int) -> dict[str, Any]:
    queue = _queue(spark, root, "single", True)
    raw = f"{root}/raw-single"
    _raw_table(spark, raw)
    one = spark.range(1).selectExpr(f"{BODY} AS body")
    out: dict[str, list[float]] = {k: [] for k in (
        "raw_append", "send", "raw_merge", "receive", "raw_merge2", "complete")}
    jobs: dict[str, int] = {}

    def raw_merge(i: int) -> None:
        src = spark.range(i, i + 1).selectExpr("id", f"{BODY} AS body")
        (DeltaTable.forPath(spark, raw).alias("t").merge(src.alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    for i in range(reps):  # interleaved: baseline, subject, baseline, subject ...
        for key, fn in (
            ("raw_append", lambda: one.selectExpr("1L AS id", "body").write.format("delta")
             .mode("append").save(raw)),
            ("send", lambda: queue.send_dataframe(one)),
            ("raw_merge", lambda i=i: raw_merge(i)),
            ("receive", lambda: queue.receive_dataframe(1).collect()),
        ):
            result, seconds, n = measured(spark, fn)
            out[key].append(seconds)
            jobs[key] = n
            if key == "receive":
                got = result
        _, seconds, n = measured(spark, lambda i=i: raw_merge(10_000 + i))
        out["raw_merge2"].append(seconds)
        locks = [(r.sequence_number, r.lock_token) for r in got]
        _, seconds, n2 = measured(spark, lambda locks=locks: queue.settle(locks, "complete"))
        out["complete"].append(seconds)
        jobs["complete"] = n2
    med = {k: round(median(v), 3) for k, v in out.items()}
    return {"part": "single", "median_s": med, "jobs": jobs, "ratios": {
        "send/raw_append": round(med["send"] / med["raw_append"], 2),
        "receive/raw_merge": round(med["receive"] / med["raw_merge"], 2),
        "complete/raw_merge": round(med["complete"] / med["raw_merge2"], 2)}}


def backlog(spark: Any, root: str, reps: int, big: int) -> dict[str, Any]:
    small_q = _queue(spark, root, "backlog-small", True)
    big_q = _queue(spark, root, "backlog-big", True)
    small_q.send_dataframe(spark.range(1000).selectExpr(f"{BODY} AS body"))
    big_q.send_dataframe(spark.range(big).selectExpr(f"{BODY} AS body"))
    times: dict[str, list[float]] = {"small": [], "big": []}
    jobs: dict[str, int] = {}
    for _ in range(reps):
        for key, queue in (("small", small_q), ("big", big_q)):
            def cycle(queue: Any = queue) -> int:
                got = queue.receive_dataframe(100).localCheckpoint()
                return int(queue.complete_dataframe(got).settled)
            settled, seconds, n = measured(spark, cycle)
            assert settled == 100, settled
            times[key].append(seconds)
            jobs[key] = n
    med = {k: round(median(v), 3) for k, v in times.items()}
    return {"part": "backlog", "messages": {"small": 1000, "big": big}, "median_s": med,
            "jobs": jobs, "ratio_big/small": round(med["big"] / med["small"], 2)}


def _drain(spark: Any, queue: Any, threads: int) -> dict[str, Any]:
    attempts = {"ok": 0, "aborted": 0}
    lock = threading.Lock()
    original = Table.merge

    def counted(*args: Any, **kwargs: Any) -> Any:
        try:
            result = original(*args, **kwargs)
        except BaseException:
            with lock:
                attempts["aborted"] += 1
            raise
        with lock:
            attempts["ok"] += 1
        return result

    Table.merge = counted  # type: ignore[method-assign]
    done = [0]

    def worker() -> None:
        idle = 0
        while idle < 3:
            got = queue.receive_dataframe(100).localCheckpoint()
            n = queue.complete_dataframe(got).settled
            idle = idle + 1 if n == 0 else 0
            with lock:
                done[0] += n

    start, cpu_before = time.perf_counter(), cpu_ticks()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    seconds = time.perf_counter() - start
    busy, total_ticks = (a - b for a, b in zip(cpu_ticks(), cpu_before, strict=True))
    Table.merge = original  # type: ignore[method-assign]
    total = attempts["ok"] + attempts["aborted"]
    return {"messages": done[0], "seconds": round(seconds, 1),
            "messages_per_s": round(done[0] / seconds, 1), "commits": attempts["ok"],
            "aborted": attempts["aborted"],
            "aborted_share": round(attempts["aborted"] / total, 3) if total else 0.0,
            "cpu_busy_share": round(busy / total_ticks, 2) if total_ticks else 0.0}


def concurrency(spark: Any, root: str, messages: int) -> dict[str, Any]:
    result = {}
    for name, partitioned in (("conc-16", True), ("conc-1", False)):
        queue = _queue(spark, root, name, partitioned)
        queue.send_dataframe(spark.range(messages).selectExpr(f"{BODY} AS body"))
        result[name] = _drain(spark, queue, 4)
    return {"part": "concurrency", "threads": 4, "messages": messages, **result,
            "speedup_16_vs_1": round(result["conc-16"]["messages_per_s"]
                                     / result["conc-1"]["messages_per_s"], 2)}


def bulk(spark: Any, root: str, reps: int, count: int, batches: tuple[int, ...] = (100_000,),
         drains: int = 3) -> dict[str, Any]:
    """A DataFrame send of ``count`` rows, and ``drains`` drains of them (receive a batch,
    complete it, until none is left) for each batch size of ``batches``, each drain on its
    own queue, after a drain of a smaller queue that is not measured; each drain is
    reported, and its median. The baseline is the raw append of the same rows, measured
    between the subjects (after a warm-up) and reported as a median."""
    rows = spark.range(count).selectExpr(f"{BODY} AS body")
    raw = f"{root}/raw-bulk"
    times: dict[str, list[float]] = {"raw_append": [], "send": []}
    jobs: dict[str, int] = {}

    def baseline() -> None:
        _, seconds, n = measured(spark, lambda: rows.write.format("delta").mode("append")
                                 .save(raw))
        times["raw_append"].append(seconds)
        jobs["raw_append"] = n

    rows.write.format("delta").mode("append").save(raw)  # warm-up: not a baseline
    queues = []
    plan = [batch for batch in batches for _ in range(drains)]
    for i in range(max(len(plan), reps // 2)):
        baseline()
        queue = _queue(spark, root, f"bulk-{i}", True)
        _, seconds, n = measured(spark, lambda queue=queue: queue.send_dataframe(rows))
        times["send"].append(seconds)
        jobs["send"] = n
        queues.append(queue)
    warm = _queue(spark, root, "bulk-warm-up", True)  # as the raw append, a drain warms
    warm.send_dataframe(rows.limit(min(count, 200_000)))  # up first (JIT, plan caches)
    _drain_rounds(warm, min(batches))
    runs: dict[int, list[tuple[int, float]]] = {}
    for queue, batch in zip(queues, plan, strict=False):
        baseline()
        runs.setdefault(batch, []).append(_drain_rounds(queue, batch))
    baseline()
    med = {k: round(median(v), 2) for k, v in times.items()}
    raw_rate = count / med["raw_append"]
    drained = {b: (min(n for n, _ in r), median([s for _, s in r])) for b, r in runs.items()}
    return {"part": "bulk", "messages": count, "median_s": med, "jobs": jobs,
            "drain": {str(b): {"messages": drained[b][0], "seconds": round(drained[b][1], 1),
                               "runs_s": [round(s, 1) for _, s in r],
                               "runs_messages": [n for n, _ in r]}
                      for b, r in runs.items()},
            "ratios": {"send_throughput/raw_append": round((count / med["send"]) / raw_rate, 3),
                       **{f"drain_{b}_throughput/raw_append": round((n / s) / raw_rate, 3)
                          for b, (n, s) in drained.items()}}}


def _drain_rounds(queue: Any, batch: int) -> tuple[int, float]:
    """(messages, seconds) of draining ``queue`` ``batch`` messages a round: each round
    receives a frame, reads it whole once (a local checkpoint, as a consumer reads its rows;
    the checkpoint is not kept) and passes the received frame to ``complete_dataframe``.
    The messages counted are those it reports settled (a round's received rows are not
    checked against them); the drain ends at the first round that settles none."""
    drained, start = 0, time.perf_counter()
    while True:
        got = queue.receive_dataframe(batch)
        got.localCheckpoint()
        n = queue.complete_dataframe(got).settled
        if n == 0:
            return drained, time.perf_counter() - start
        drained += n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="single,backlog,concurrency,bulk")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--bulk", type=int, default=1_000_000)
    args = parser.parse_args()
    run_parts("sbqueue-bench", args.parts, {
        "single": lambda spark, root: single(spark, root, args.reps),
        "backlog": lambda spark, root: backlog(spark, root, args.reps, args.backlog),
        "concurrency": lambda spark, root: concurrency(spark, root, args.messages),
        "bulk": lambda spark, root: bulk(spark, root, args.reps, args.bulk),
    })


if __name__ == "__main__":
    main()
