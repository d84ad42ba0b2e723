"""The ledger of one entity: the only module that reads or writes it (issue 18, point 3).

The ledger (layout: ``engine.schema``) holds the state of every message a cursor has passed,
the cursors themselves, sessions, transaction markers and completion records. Every other
module of the engine asks a ``Ledger`` for what it needs (rows by kind, a guarded MERGE of
change rows, records appended, a keyed DML) instead of opening the Delta table itself, so
that how the ledger is stored can change in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sbqueue.core.sequence import partition_of
from sbqueue.core.transitions import Lane
from sbqueue.engine.columns import values_frame
from sbqueue.engine.schema import (
    LEDGER_COLUMNS,
    LEDGER_KEYS,
    LEDGER_MATCH,
    LEDGER_PROPERTIES,
    LEDGER_PROTOCOL,
    LEDGER_SCHEMA,
    RECORD,
    change_frame,
    ledger_match,
    ledger_row,
)
from sbqueue.store import deadline
from sbqueue.store.delta import Table
from sbqueue.store.guarded import EXPECT_COLUMN, OP_COLUMN, apply_guarded
from sbqueue.store.sql import spark_writes, sql_name

__all__ = ["Ledger"]


def _names(values: Iterable[Any]) -> str:
    return ", ".join(repr(str(v)) for v in sorted(set(values)))


def _numbers(values: Iterable[int]) -> str:
    return ", ".join(str(int(v)) for v in sorted(set(values)))


class Ledger(Table):
    """An entity's ledger table (by path), with the reads and writes the engine makes."""

    def create_empty(self, here: bool | None = None) -> None:
        """Create the table, without cursor rows: a partition without a p row has passed
        nothing yet (``engine.receive.attempt.with_unstored``); its first cursor move inserts it.
        One commit, no data file (decision 011)."""
        self.create(LEDGER_SCHEMA, ["partition_id", "lane"], LEDGER_PROPERTIES,
                    LEDGER_PROTOCOL, here)

    def messages(self, where: Column | None = None, version: int | None = None) -> DataFrame:
        """The message (``m``) rows."""
        kind = F.col("row_type") == "m"
        return self.rows(kind if where is None else kind & where, version)

    def message_rows(self, seqs: Sequence[int], lanes: Iterable[str] | None = None,
                     version: int | None = None) -> DataFrame:
        """The message rows of these sequence numbers (literal partition predicates)."""
        where = (F.col("partition_id").isin(sorted({partition_of(s) for s in seqs}))
                 & F.col("sequence_number").isin([int(s) for s in seqs]))
        if lanes is not None:
            where = where & F.col("lane").isin(sorted(set(lanes)))
        return self.messages(where, version)

    def cursors(self) -> DataFrame:
        """The cursor (``p``) rows stored: one per partition a cursor has moved in."""
        return self.rows(F.col("row_type") == "p")

    def places(self, kinds: Sequence[str], partitions: int) -> list[tuple[int, int, int]]:
        """(partition, cursor version, cursor index) of the rows of ``kinds`` (cursors,
        forwarding windows) in ``partitions`` partitions: read on the driver where it can
        be, else with Spark."""
        wanted = ["partition_id", "cursor_version", "cursor_index"]
        found = self.scan_here({"partition_id": list(range(partitions))},
                               [*wanted, "row_type"], lambda r: r["row_type"] in kinds)
        if found is None:
            found = [r.asDict() for r in self.rows(F.col("row_type").isin(list(kinds)))
                     .select(*wanted).collect()]
        return [(int(r["partition_id"]), int(r["cursor_version"]), int(r["cursor_index"]))
                for r in found]

    def segments_held(self, partitions: int) -> set[tuple[int, int]]:
        """(partition, inbox segment) of every message row pointing into a segment (the
        message's body is still read there): on the driver where it can be, else Spark."""
        found = self.scan_here({"partition_id": list(range(partitions))},
                               ["partition_id", "segment", "row_type"],
                               lambda r: r["row_type"] == "m" and r["segment"] is not None)
        if found is None:
            found = [r.asDict() for r in self.messages(F.col("segment").isNotNull())
                     .select("partition_id", "segment").distinct().collect()]
        return {(int(r["partition_id"]), int(r["segment"])) for r in found}

    def counters(self) -> dict[int, int]:
        """Each partition's last counter handed out by its cursor (none yet: absent)."""
        rows = self.cursors().select("partition_id", "last_counter").collect()
        return {int(r[0]): int(r[1]) for r in rows}

    def sessions(self, where: Column | None = None) -> DataFrame:
        """The session (``s``) rows."""
        kind = (F.col("lane") == Lane.SESSION) & (F.col("row_type") == "s")
        return self.rows(kind if where is None else kind & where)

    def merge_changes(self, scope: str, changes: DataFrame | list[dict[str, Any]],
                      delete_if: str = "false") -> None:
        """Commit change rows (full rows with EXPECT_COLUMN and OP_COLUMN, a DataFrame or
        built on the driver) in one guarded MERGE over ``scope`` (``store.guarded``)."""
        if isinstance(changes, list):
            changes = change_frame(self.spark, changes)
        else:
            changes = changes.select(*LEDGER_COLUMNS, EXPECT_COLUMN, OP_COLUMN)
        self.merge(scope, LEDGER_KEYS, changes, LEDGER_COLUMNS, LEDGER_MATCH, delete_if)

    def merge_rows(self, rows: list[dict[str, Any]], partitions: Iterable[int],
                   lanes: Iterable[str]) -> None:
        """Commit full rows built on the driver, scoped to whole partitions and lanes: a
        session's lock or state, a transaction. Rewritten on the driver where receives are
        (the guarded MERGE's contract on the rows as read, decision 016), else one MERGE."""
        partitions, lanes = sorted(set(partitions)), sorted(set(lanes))
        if not self._rewrite_rows(rows, partitions, lanes):
            self.merge_changes(f"t.partition_id IN ({_numbers(partitions)}) AND t.lane IN "
                               f"({_names(lanes)})", rows)

    def _rewrite_rows(self, rows: list[dict[str, Any]], partitions: list[int],
                      lanes: list[str]) -> bool:
        """``merge_rows`` as a rewrite of those partitions and lanes from the version read
        (a commit since to any of them fails it: StaleRead); False, nothing done, where
        the ledger cannot be rewritten here or they hold more rows than a driver read."""
        rows = [{EXPECT_COLUMN: None, OP_COLUMN: None, **r} for r in rows]
        # Rows may enter lanes outside the scope read (a dead-letter in a transaction): the
        # MERGE inserts them; a rewrite must read and replace those lanes too.
        scope = {(p, lane) for p in partitions for lane in lanes} | {
            (int(r["partition_id"]), str(r["lane"])) for r in rows}
        pinned = self.pin() if self.commits_here() else None
        if pinned is None:
            return False
        try:
            stored = pinned.rows({"partition_id": sorted({p for p, _ in scope}),
                                  "lane": sorted({lane for _, lane in scope})}, None,
                                 lambda r: (r["partition_id"], r["lane"]) in scope)
            if stored is None:
                return False
            out = apply_guarded(stored, rows, LEDGER_KEYS, LEDGER_COLUMNS, ledger_match,
                                lambda stored, change: False)
            self.rewrite_here(pinned, [{"partition_id": p, "lane": lane}
                                       for p, lane in sorted(scope)], out)
            return True
        finally:
            pinned.release()

    def append_rows(self, rows: list[dict[str, Any]], tag: str | None = None) -> None:
        """Append full rows in one blind commit (found in the history by ``tag``): on the
        driver where receives commit there too (decision 012: then Spark does not rebuild
        its snapshot after each), else with Spark."""
        if tag is not None and self.commits_here():
            self.append_here([{c: r.get(c) for c in LEDGER_COLUMNS} for r in rows], tag)
            return
        # an inline table: a Python-row DataFrame runs Python workers in the write's job
        self.append(values_frame(self.spark, [tuple(r[c] for c in LEDGER_COLUMNS) for r in rows],
                                 LEDGER_SCHEMA), tag=tag)

    def append_records(self, lane: str, locks: list[tuple[int, str]], written_at: datetime,
                       tag: str) -> None:
        """Completion records of (sequence number, token): one commit that conflicts with
        nothing (decision 011)."""
        self.append_rows([ledger_row(partition_id=partition_of(seq), lane=lane,
                                     sequence_number=seq, row_type=RECORD, row_version=0,
                                     lock_token=token, enqueued_time_utc=written_at)
                          for seq, token in locks], tag)

    def _written(self) -> str:
        """The ledger's SQL name for a Spark write (``spark_writes``)."""
        return sql_name(spark_writes(self.spark, self.path))

    def delete_where(self, where: str) -> int:
        """One keyed Delta DELETE (``where``: SQL with literal partitions); rows deleted."""
        deadline.check()
        row = self.spark.sql(f"DELETE FROM {self._written()} WHERE {where}"
                             ).first()
        return int(row[0]) if row is not None else 0

    def update_where(self, sets: str, where: str) -> int:
        """One keyed Delta UPDATE; rows updated."""
        deadline.check()
        row = self.spark.sql(f"UPDATE {self._written()} SET {sets} WHERE "
                             f"{where}").first()
        return int(row[0]) if row is not None else 0
