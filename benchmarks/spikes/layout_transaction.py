"""Spike: a transaction publishes its sends and applies its settlements in ONE commit (S12.2).

On one ledger partition: lock 3 messages, then one guarded MERGE that completes 2 of them,
dead-letters the third and inserts 3 new messages (numbered from the partition counter),
advancing the counter. Checks: exactly one new ledger version, whose history entry is one
MERGE with those row counts; the new messages exist only from that version on. Then the
same transaction against a stale read: nothing at all is committed.

    python benchmarks/spikes/layout_transaction.py
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import scratch, session
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from sbqueue.engine import Namespace
from sbqueue.engine.schema import LEDGER_COLUMNS
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store.delta import EXPECT_COLUMN, OP_COLUMN, StaleRead, guarded_merge


def transaction_changes(queue, locked, partition: int):  # type: ignore[no-untyped-def]
    """Complete the first two locked rows, dead-letter the third, send three new ones."""
    ledger = queue._ledger(partition)
    meta = ledger.where("row_type = 'p'").first()
    counter, meta_version = int(meta["last_counter"]), int(meta["row_version"])
    current = ledger.where(F.col("sequence_number").isin(locked)).withColumn(
        EXPECT_COLUMN, F.col("row_version"))
    settle = current.withColumn(
        OP_COLUMN, F.when(F.col("sequence_number") == locked[2], "upsert").otherwise("delete")
    ).withColumn("sub_queue", F.when(F.col("sequence_number") == locked[2], "dlq")
                 .otherwise(F.col("sub_queue"))).withColumn(
        "row_version", F.col("row_version") + 1)
    now = datetime.now(timezone.utc)
    sends = queue.spark.createDataFrame(
        [(partition, f"m:{(partition << 48) + counter + i:016X}", "m", 1,
          (partition << 48) + counter + i, f"tx-{i}".encode(), now, "", "Active", 0, None,
          "upsert") for i in (1, 2, 3)],
        "partition_id int, key string, row_type string, row_version long, sequence_number "
        "long, body binary, enqueued_time_utc timestamp, sub_queue string, state string, "
        "delivery_count int, _expect long, _op string")
    meta_row = queue.spark.createDataFrame(
        [(partition, "p", "p", meta_version + 1, int(meta["inbox_version"]), counter + 3,
          meta_version, "upsert")],
        "partition_id int, key string, row_type string, row_version long, inbox_version long,"
        " last_counter long, _expect long, _op string")
    cols = [*LEDGER_COLUMNS, EXPECT_COLUMN, OP_COLUMN]
    return settle.select(*cols).unionByName(sends, allowMissingColumns=True).unionByName(
        meta_row, allowMissingColumns=True).select(*cols)


def main() -> None:
    spark = session()
    with scratch("txn") as root:
        ServiceBusAdministrationClient(root, spark=spark).create_queue("q")
        queue = Namespace(root, spark).entity("q")
        queue.send_dataframe(spark.range(5).selectExpr("CAST(id AS STRING) AS body"))
        locked = [r[0] for r in queue.receive_dataframe(3).select("sequence_number").collect()]
        table = DeltaTable.forPath(spark, queue.ledger_path)
        before = table.history(1).first()["version"]
        stale = transaction_changes(queue, locked, 0).localCheckpoint()
        metrics = guarded_merge(spark, queue.ledger_path, "partition_id", [0], "key",
                                transaction_changes(queue, locked, 0), LEDGER_COLUMNS)
        after = table.history(1).first()
        rows = queue.messages().select("sequence_number", "sub_queue").collect()
        print(json.dumps({
            "commits_made": after["version"] - before,
            "operation": after["operation"],
            "merge_metrics": metrics,
            "new_messages_visible_before_commit": spark.read.format("delta")
            .option("versionAsOf", before).load(queue.ledger_path)
            .where("body LIKE 'tx-%'").count(),
            "new_messages_after": sum(1 for r in rows if r[0] > 5),
            "dead_lettered": sum(1 for r in rows if r[1] == "dlq"),
        }))
        try:  # the same change set again: every row it read has changed since
            guarded_merge(spark, queue.ledger_path, "partition_id", [0], "key", stale,
                          LEDGER_COLUMNS)
            print(json.dumps({"stale_transaction": "COMMITTED (wrong)"}))
        except StaleRead:
            print(json.dumps({"stale_transaction": "aborted",
                              "commits_made": table.history(1).first()["version"]
                              - after["version"]}))


if __name__ == "__main__":
    main()
