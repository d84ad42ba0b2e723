"""Spike: forwarding can be exactly-once (S13.4), whatever step a forwarder dies at.

Forwarder round N on source partition P (all Delta, no external state):
  1. mark: guarded MERGE sets forward_batch = N on up to K active source rows
     (a ledger column the forwarding issue adds; here the spike's own tables);
  2. copy: append the marked rows to the destination inbox with Delta's idempotent writes
     (txnAppId = fwd-<source>-<P>, txnVersion = N): a repeat of round N is skipped;
  3. drop: delete the rows marked N from the source.
A rerun first finishes any marked round (same N). The spike kills the forwarder (raises)
after each step in turn, reruns it, and checks the destination holds every message once.

    python benchmarks/spikes/layout_forward.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import scratch, session
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from sbqueue.store.delta import append

BATCH = 40


class Crash(Exception):
    pass


def applied_round(spark, dest: str, app_id: str) -> int:  # type: ignore[no-untyped-def]
    """The last txnVersion the destination recorded for this forwarder (0 if none)."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, dest)
    snapshot = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    found = snapshot.transactions().get(app_id)
    return int(found.get()) if found.isDefined() else 0


def forward_round(spark, source: str, dest: str, crash_after: str | None) -> int:  # type: ignore[no-untyped-def]
    app_id = "fwd-source-0"
    src = spark.read.format("delta").load(source)
    pending = src.agg(F.max("forward_batch")).first()[0]
    if pending is None:  # start a new round after the last one the destination applied
        n = applied_round(spark, dest, app_id) + 1
        ids = [r[0] for r in src.orderBy("seq").limit(BATCH).select("seq").collect()]
        if not ids:
            return 0
        DeltaTable.forPath(spark, source).update(
            condition=(F.col("partition_id") == 0) & F.col("seq").isin(ids),
            set={"forward_batch": F.lit(n)})
        if crash_after == "mark":
            raise Crash
    else:  # finish the round a dead forwarder left
        n = int(pending)
    marked = spark.read.format("delta").load(source).where(F.col("forward_batch") == n)
    moved = marked.count()
    append(marked.select("seq", "body"), dest, txn=(app_id, n))  # skipped if done before
    if crash_after == "copy":
        raise Crash
    DeltaTable.forPath(spark, source).delete(
        (F.col("partition_id") == 0) & (F.col("forward_batch") == n))
    if crash_after == "drop":
        raise Crash
    return moved


def main() -> None:
    spark = session()
    with scratch("forward") as folder:
        source, dest = f"{folder}/source", f"{folder}/dest"
        spark.range(1, 201).selectExpr(
            "0 AS partition_id", "id AS seq", "concat('m', id) AS body",
            "CAST(NULL AS LONG) AS forward_batch",
        ).write.format("delta").partitionBy("partition_id").save(source)
        spark.createDataFrame([], "seq long, body string").write.format("delta").save(dest)
        crashes = 0
        plan = ["mark", "copy", "drop", "copy", "mark", "drop", None, None, None, None, None,
                None]
        for crash_after in plan:
            try:
                forward_round(spark, source, dest, crash_after)
            except Crash:
                crashes += 1
        left = spark.read.format("delta").load(source).count()
        got = spark.read.format("delta").load(dest)
        print(json.dumps({
            "messages": 200, "crashes_injected": crashes,
            "left_in_source": left,
            "in_destination": got.count(),
            "distinct_in_destination": got.select("seq").distinct().count(),
        }))


if __name__ == "__main__":
    main()
