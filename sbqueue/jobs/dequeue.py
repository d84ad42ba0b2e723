"""The dequeue job: receive a batch, run a user function or a SQL statement over it,
write the results to a Delta sink, then settle.

    spark-submit jobs/dequeue.py --namespace PATH --entity orders --sink /data/out \\
        (--function my_pkg.handlers:enrich | --sql "SELECT ... FROM batch") \\
        [--max-messages 10000] [--batches 0] [--on-failure abandon|dead-letter]

The function takes the batch DataFrame (one row a message: sequence_number, body,
properties ...) and returns a DataFrame that keeps ``sequence_number``; a boolean column
``_failed`` marks messages to abandon or dead-letter (``_error``: the reason's text). The
sink gets the other rows with ``_sbq_entity`` and ``_sbq_sequence_number``, by an
insert-only MERGE on those two: a batch delivered again after a crash between the write
and the settlement adds no row twice. Then the batch is completed (failed rows abandoned
or dead-lettered).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sbqueue.jobs.runner import JobError, base_parser, run_job
from sbqueue.store.delta import Table
from sbqueue.store.guarded import retry_conflicts

__all__ = ["load_function", "main", "parser", "write_sink"]

KEY = ("_sbq_entity", "_sbq_sequence_number")


def parser() -> argparse.ArgumentParser:
    p = base_parser("sbqueue-dequeue", "Receive, transform, write to a Delta sink, settle.")
    p.add_argument("--entity", required=True, help="a queue or topic/Subscriptions/name")
    p.add_argument("--sink", required=True, help="the Delta sink's path")
    work = p.add_mutually_exclusive_group(required=True)
    work.add_argument("--function", help="module.path:function(DataFrame) -> DataFrame")
    work.add_argument("--sql", help="a SELECT over the view 'batch'")
    p.add_argument("--max-messages", type=int, default=10_000)
    p.add_argument("--batches", type=int, default=1, help="batches to run; 0: until empty")
    p.add_argument("--on-failure", choices=("abandon", "dead-letter"), default="abandon")
    return p


def load_function(path: str) -> Callable[[DataFrame], DataFrame]:
    module, sep, name = path.partition(":")
    if not sep:
        raise JobError(f"--function {path!r}: expected module.path:function")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise JobError(f"--function {path!r}: {exc}") from None
    if not callable(found):
        raise JobError(f"--function {path!r} is not callable")
    return found  # type: ignore[no-any-return]


def write_sink(results: DataFrame, sink: str, entity: str) -> None:
    """Insert the rows whose (entity, sequence number) the sink does not hold yet."""
    rows = results.withColumns({"_sbq_entity": F.lit(entity),
                                "_sbq_sequence_number": F.col("sequence_number")})
    table = Table(results.sparkSession, sink)
    condition = " AND ".join(f"t.{k} = s.{k}" for k in KEY)
    retry_conflicts(lambda: table.insert_missing(rows, condition), what=f"write to {sink}")


def _one_batch(args: argparse.Namespace, entity: Any,
               work: Callable[[DataFrame], DataFrame]) -> dict[str, int]:
    batch = entity.receive_dataframe(args.max_messages).localCheckpoint()
    received = batch.count()
    if not received:
        return {"received": 0}
    results = work(batch)
    if "sequence_number" not in results.columns:
        raise JobError("the result must keep the batch's sequence_number column")
    if "_failed" not in results.columns:
        results = results.withColumn("_failed", F.lit(False))
    if "_error" not in results.columns:
        results = results.withColumn("_error", F.lit(None).cast("string"))
    results = results.localCheckpoint()
    failed = {int(r[0]): r[1] for r in results.where("_failed").select(
        "sequence_number", "_error").collect()}
    write_sink(results.where(~F.col("_failed")).drop("_failed", "_error"), args.sink,
               args.entity)
    good = batch.where(~F.col("sequence_number").isin(sorted(failed)))
    completed = entity.complete_dataframe(good).settled
    bad = batch.where(F.col("sequence_number").isin(sorted(failed)))
    if failed and args.on_failure == "dead-letter":
        reason = next((e for e in failed.values() if e), None)
        entity.dead_letter_dataframe(bad, "ProcessingFailed", reason)
    elif failed:
        entity.abandon_dataframe(bad)
    return {"received": received, "completed": completed, "failed": len(failed)}


def _body(args: argparse.Namespace, namespace: Any) -> dict[str, Any]:
    entity = namespace.entity(args.entity)
    spark = namespace.spark
    if args.function:
        work = load_function(args.function)
    else:
        def work(batch: DataFrame) -> DataFrame:
            batch.createOrReplaceTempView("batch")
            result: DataFrame = spark.sql(args.sql)
            return result
    totals = {"received": 0, "completed": 0, "failed": 0, "batches": 0}
    while args.batches == 0 or totals["batches"] < args.batches:
        counts = _one_batch(args, entity, work)
        if not counts["received"]:
            break
        totals["batches"] += 1
        for key, value in counts.items():
            totals[key] += value
    return {"entity": args.entity, "sink": args.sink, **totals}


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("sbqueue-dequeue", parser(), _body, argv)


def run() -> None:
    raise SystemExit(main())
