"""The rows of forwarding windows (decision 017), read once, and the windows' end.

A claimed window (``engine.forward.window``) names a stretch of the inbox head; here its
rows are read with their bodies (the change feed of those commits only, on the driver with
Arrow or with Spark), numbered as the cursor numbered them, grouped into runs of
consecutive numbers, and the ``w`` rows released once the destination holds them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sbqueue.core.sequence import sequence_of
from sbqueue.core.transitions import Lane
from sbqueue.engine.columns import sequence_column
from sbqueue.engine.forward.window import NUMBERED, ForwardWindow, after_heads
from sbqueue.engine.handle import EntityHandle
from sbqueue.engine.schema import INBOX_SCHEMA, LEDGER_COLUMNS, WINDOW, owned_rows
from sbqueue.store.guarded import EXPECT_COLUMN, OP_COLUMN
from sbqueue.store.thresholds import MAX_RUNS, READ_CAP

__all__ = ["Run", "leftover_windows", "numbered_rows", "release", "runs", "window_messages",
           "window_rows"]


_INBOX_COLUMNS = [f.name for f in INBOX_SCHEMA.fields]


def window_messages(source: EntityHandle, windows: list[ForwardWindow]
                    ) -> list[dict[str, Any]] | None:
    """The windows' messages, whole, each with the sequence number its window gave it,
    read on the driver (delta-rs, no Spark job); None where they cannot be read here.
    A partition may hold several windows (range locks of several receives)."""
    after = min(w.start.version for w in windows) - 1
    up_to = max(w.end_version for w in windows)
    table = source.inbox.appended_table_here(after, up_to, _INBOX_COLUMNS, READ_CAP,
                                             _skipping_sql(windows))
    if table is None:
        return None
    firsts = {w.partition: w.start for w in sorted(windows, key=_start, reverse=True)}
    candidates = after_heads(table, list(firsts.values()), source.target).to_pylist()
    order = {p: sorted((w for w in windows if w.partition == p), key=_start)
             for p in firsts}
    at = dict.fromkeys(firsts, 0)
    counters = {(w.partition, w.last_counter): w.start.counter for w in windows}
    rows: list[dict[str, Any]] = []
    for row in candidates:
        partition, place = int(row["partition_id"]), (row["_commit_version"],
                                                      row["batch_index"])
        mine = order[partition]
        while at[partition] < len(mine) and place > _end(mine[at[partition]]):
            at[partition] += 1
        if at[partition] == len(mine) or place <= _start(mine[at[partition]]):
            continue  # between windows, or past the last
        w = mine[at[partition]]
        counters[(partition, w.last_counter)] += 1
        row["sequence_number"] = sequence_of(partition, counters[(partition, w.last_counter)])
        rows.append(row)
    if any(counters[(w.partition, w.last_counter)] != w.last_counter for w in windows):
        return None  # not the rows the claim counted: Spark reads them
    return rows


def _start(w: ForwardWindow) -> tuple[int, int]:
    return (w.start.version, w.start.position)


def _end(w: ForwardWindow) -> tuple[int, int]:
    return (w.end_version, w.end_index)


def window_rows(source: EntityHandle, windows: list[ForwardWindow]) -> DataFrame:
    """The windows' messages, whole, each with the sequence number its window gave it,
    read from the change feed of the windows' commits only."""
    after = min(w.start.version for w in windows) - 1
    up_to = max(w.end_version for w in windows)
    inside = " ".join(
        f"WHEN partition_id = {w.partition} AND (_commit_version > {w.start.version}L OR "
        f"(_commit_version = {w.start.version}L AND batch_index > {w.start.position}L)) "
        f"AND (_commit_version < {w.end_version}L OR (_commit_version = {w.end_version}L "
        f"AND batch_index <= {w.end_index}L)) THEN {k}" for k, w in enumerate(windows))
    first = F.expr("CASE _window " + " ".join(
        f"WHEN {k} THEN {w.start.counter}L" for k, w in enumerate(windows)) + " END")
    rank = F.row_number().over(
        Window.partitionBy("_window").orderBy("_commit_version", "batch_index"))
    rows = source.inbox.appended(after, up_to, _skipping(windows) & owned_rows(
        source.target)).withColumn("_window", F.expr(f"CASE {inside} END"))
    return rows.where(F.col("_window").isNotNull()).withColumn(
        "sequence_number", sequence_column(F.col("partition_id"), first + rank)
    ).drop("_window")


def numbered_rows(source: EntityHandle, windows: list[ForwardWindow], numbered: pa.Table
                  ) -> DataFrame:
    """``window_rows`` by the claim's own numbering (``Claim.numbered``), no sort of whole
    rows to number them: where the numbering is a few runs (a send grouped by partition,
    ``engine.send.frame``), each run's numbers are a function of the batch index (one
    expression, no Spark job); else the rows are joined to their numbers (a broadcast of
    narrow rows, one job)."""
    rows = source.inbox.appended(min(w.start.version for w in windows) - 1,
                                 max(w.end_version for w in windows),
                                 _skipping(windows) & owned_rows(source.target))
    found = runs(numbered)
    if len(found) > MAX_RUNS:
        return rows.join(F.broadcast(source.spark.createDataFrame(numbered)),
                         list(NUMBERED[:3]))
    numbers = F.expr("CASE " + " ".join(
        f"WHEN partition_id = {r.partition} AND _commit_version = {r.version}L AND "
        f"batch_index BETWEEN {r.low}L AND {r.high}L THEN batch_index + {r.offset}L"
        for r in found) + " END") if found else F.lit(None)
    return rows.withColumn("sequence_number", numbers.cast("long")).where(
        F.col("sequence_number").isNotNull())


@dataclass(frozen=True)
class Run:
    """Rows of one partition and commit whose batch indexes ``low..high`` and sequence
    numbers both go up by one: a row's number is its batch index plus ``offset``."""

    partition: int
    version: int
    low: int
    high: int
    offset: int


def runs(numbered: pa.Table) -> list[Run]:
    """``numbered`` (``NUMBERED`` columns, in commit order within each partition) as runs."""
    if numbered.num_rows == 0:
        return []
    part, version, index, seq = (numbered.column(c).to_numpy().astype(np.int64)
                                 for c in NUMBERED)
    starts = np.flatnonzero(np.concatenate([[True], (part[1:] != part[:-1])
                                            | (version[1:] != version[:-1])
                                            | (index[1:] != index[:-1] + 1)
                                            | (seq[1:] != seq[:-1] + 1)]))
    ends = np.append(starts[1:], len(part)) - 1
    return [Run(int(part[a]), int(version[a]), int(index[a]), int(index[b]),
                int(seq[a] - index[a])) for a, b in zip(starts, ends, strict=True)]


def _skipping(windows: list[ForwardWindow]) -> Column:
    """A filter holding every row of ``windows`` (and a few more) that Delta can prune files
    and row groups with: the batch-index bounds of each window within one commit (a drain
    of one large send reads only the files of its window, not the whole send)."""
    return F.expr(_skipping_sql(windows))


def _skipping_sql(windows: list[ForwardWindow]) -> str:
    """``_skipping`` as SQL (delta-rs takes a predicate as text)."""
    def one(w: ForwardWindow) -> str:
        mine = f"partition_id = {w.partition}"
        if w.start.version != w.end_version:
            return mine
        return f"({mine} AND batch_index > {w.start.position} AND batch_index <= {w.end_index})"
    return " OR ".join(one(w) for w in windows)


def release(source: EntityHandle, windows: list[ForwardWindow],
            dead: Iterable[dict[str, Any]] = ()) -> None:
    """Delete the windows' ``w`` rows (and store ``dead``, transfer dead-letter rows of
    messages that could not go) in one commit. Windows another step released already are
    left out (two steps may resume the same windows); none left: nothing to commit."""
    tokens = {w.token for w in windows}
    held = source.ledger.scan_here(
        {"partition_id": sorted({w.partition for w in windows}), "lane": [Lane.TRANSFER]},
        ["row_type", "partition_id", "sequence_number", "lock_token"],
        lambda r: r["row_type"] == WINDOW and r["lock_token"] in tokens)
    keys = None if held is None else {(r["partition_id"], r["sequence_number"]) for r in held}
    mine = [w for w in windows if keys is None
            or (w.partition, sequence_of(w.partition, w.last_counter)) in keys]
    if not mine:
        return
    gone = [w.row(**{EXPECT_COLUMN: w.row_version, OP_COLUMN: "delete"}) for w in mine]
    rows = [*gone, *({**r, EXPECT_COLUMN: None, OP_COLUMN: "upsert"} for r in dead)]
    source.ledger.merge_rows(rows, sorted({w.partition for w in mine}),
                             [Lane.TRANSFER, Lane.TRANSFER_DEAD_LETTER])


def leftover_windows(source: EntityHandle, now: datetime) -> dict[str, list[ForwardWindow]]:
    """The windows whose lease ran out (their step died), by token: read on the driver
    where it can be, else with Spark."""
    found = source.ledger.scan_here(
        {"lane": [Lane.TRANSFER]}, LEDGER_COLUMNS,
        lambda r: r["row_type"] == WINDOW and r["locked_until_utc"] <= now)
    if found is None:
        found = [r.asDict() for r in source.ledger.rows(
            (F.col("lane") == Lane.TRANSFER) & (F.col("row_type") == WINDOW)
            & (F.col("locked_until_utc") <= F.lit(now).cast("timestamp"))).collect()]
    out: dict[str, list[ForwardWindow]] = {}
    for row in found:
        window = ForwardWindow.of_row(row)
        out.setdefault(window.token, []).append(window)
    return out
