"""Settling locked messages: find the rows by (partition, sequence number), check each lock,
apply ``core.transitions.settle_outcome`` as one projection, commit one guarded MERGE.

Rows are found through a literal scope (partition, lanes, sequence range), so Delta reads
only the files that can hold them (partition pruning and min/max data skipping) and the
commit conflicts only with work on those partitions (S14.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sbqueue.core.sequence import COUNTER_BITS
from sbqueue.core.transitions import SettleContext, settle_outcome, settle_valid
from sbqueue.engine.columns import project, to_column
from sbqueue.engine.receive import merge_scope
from sbqueue.engine.schema import LEDGER_COLUMNS, LEDGER_TYPES
from sbqueue.store.delta import EXPECT_COLUMN, OP_COLUMN, guarded_merge

__all__ = ["SettleResult", "settle_once"]


@dataclass
class SettleResult:
    """Rows settled; sequence numbers whose lock was no longer valid (expired or another
    token, S6.6); and those no longer in the entity at all (settled before)."""

    settled: int = 0
    lock_lost: list[int] = field(default_factory=list)
    already_settled: list[int] = field(default_factory=list)


def _scope(locks: list[tuple[int, str]], lanes: tuple[str, ...]) -> str:
    by_partition: dict[int, list[int]] = {}
    for seq, _ in locks:
        by_partition.setdefault(seq >> COUNTER_BITS, []).append(seq)
    return merge_scope([(p, lane, min(seqs), max(seqs))
                        for p, seqs in by_partition.items() for lane in lanes])


def settle_once(spark: SparkSession, ledger_path: str, locks: list[tuple[int, str]],
                lanes: tuple[str, ...], ctx: SettleContext) -> SettleResult:
    """One attempt; raises StaleRead or a Delta conflict if a row changed meanwhile."""
    scope = _scope(locks, lanes)
    wanted = spark.createDataFrame(locks, "sequence_number long, _token string")
    rows = spark.read.format("delta").load(ledger_path).alias("t").where(
        F.expr(scope) & (F.col("row_type") == "m")).join(F.broadcast(wanted), "sequence_number")
    checked = rows.withColumn("_valid", F.coalesce(to_column(settle_valid(ctx.now)),
                                                   F.lit(False))).localCheckpoint()
    verdicts = {int(r[0]): bool(r[1]) for r in checked.select(
        "sequence_number", "_valid").collect()}
    result = SettleResult(
        settled=sum(verdicts.values()),
        lock_lost=sorted(s for s, ok in verdicts.items() if not ok),
        already_settled=sorted({s for s, _ in locks} - set(verdicts)),
    )
    if result.settled:
        changes: DataFrame = project(
            checked.where("_valid").withColumn(EXPECT_COLUMN, F.col("row_version")),
            settle_outcome(ctx), LEDGER_TYPES)
        guarded_merge(spark, ledger_path, scope, ["partition_id", "sequence_number"],
                      changes.select(*LEDGER_COLUMNS, EXPECT_COLUMN, OP_COLUMN), LEDGER_COLUMNS)
    return result
