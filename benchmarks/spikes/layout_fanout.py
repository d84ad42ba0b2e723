"""Spike: a topic send fans out to many subscriptions atomically (S15.2).

The topic's inbox row carries ``targets``: the subscriptions (and rule copies) that matched
at send time. One append is one commit, so all subscriptions get their copy or none does.
Shown here with 50 subscriptions:
  1. a send whose write job fails midway (one bad row raises): no subscription sees anything;
  2. a good send of 100 messages with varying targets: each subscription's ingest (change
     feed since its watermark, filtered by array_contains(targets, sub)) finds exactly the
     messages that named it.

    python benchmarks/spikes/layout_fanout.py
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import scratch, session
from pyspark.sql import functions as F

from sbqueue.engine.schema import INBOX_PROPERTIES, INBOX_SCHEMA
from sbqueue.store.delta import append, create_table, latest_version, read_appended

SUBSCRIPTIONS = 50


def rows(spark, count: int, poison: bool):  # type: ignore[no-untyped-def]
    """Messages whose targets are the subscriptions s<k> with k % (id % 5 + 1) == 0."""
    subs = F.array(*[F.lit(f"s{k}") for k in range(SUBSCRIPTIONS)])
    df = spark.range(count).select(
        F.lit(0).alias("partition_id"), F.lit(0).cast("long").alias("segment"),
        F.lit("send").alias("send_id"), F.col("id").alias("batch_index"),
        F.col("id").cast("string").cast("binary").alias("body"),
        F.filter(subs, lambda s: F.substring(s, 2, 3).cast("int") % (F.col("id") % 5 + 1) == 0)
        .alias("targets"),
    )
    if poison:  # the write job dies on the last row, after others were written
        df = df.withColumn("body", F.when(F.col("batch_index") == count - 1,
                                          F.raise_error(F.lit("crash")).cast("binary"))
                           .otherwise(F.col("body")))
    for field in INBOX_SCHEMA.fields:
        if field.name not in df.columns:
            df = df.withColumn(field.name, F.lit(None).cast(field.dataType))
    return df.select(*[f.name for f in INBOX_SCHEMA.fields])


def main() -> None:
    spark = session()
    with scratch("fanout") as folder:
        inbox = f"{folder}/inbox"
        create_table(spark, inbox, INBOX_SCHEMA, ["partition_id", "segment"], INBOX_PROPERTIES)
        with contextlib.suppress(Exception):  # the injected crash
            append(rows(spark, 100, poison=True), inbox)
        after_crash = latest_version(spark, inbox)
        append(rows(spark, 100, poison=False), inbox)
        latest = latest_version(spark, inbox)
        copies = read_appended(spark, inbox, 0, latest, F.lit(True)).select(
            F.explode("targets").alias("sub"), "batch_index")
        got = {r["sub"]: r["n"] for r in copies.groupBy("sub").agg(F.count("*").alias("n"))
               .collect()}
        expected = {f"s{k}": sum(1 for i in range(100) if k % (i % 5 + 1) == 0)
                    for k in range(SUBSCRIPTIONS)}
        print(json.dumps({
            "commits_after_failed_send": after_crash,  # 0 = only the table creation
            "commits_after_good_send": latest,
            "subscriptions": SUBSCRIPTIONS,
            "copies_total": sum(got.values()),
            "every_subscription_exact": got == {k: v for k, v in expected.items() if v},
        }))


if __name__ == "__main__":
    main()
