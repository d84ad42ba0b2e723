"""The inbox of one queue or topic: the only module that reads or writes it (issue 18).

The inbox (layout: ``engine.schema``) is the message log: sends append to it, rows never
change, and maintenance drops whole segments. Every other module of the engine asks an
``Inbox`` for rows (by send, after the cursors, in commit order) instead of opening the
Delta table itself.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import pyarrow as pa
from deltalake.exceptions import DeltaError
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sbqueue.engine.schema import INBOX_PROPERTIES, INBOX_PROTOCOL, INBOX_SCHEMA
from sbqueue.store import driver, log_reads, row_ids
from sbqueue.store.delta import Table
from sbqueue.store.logfiles import first_commit_since, log_files
from sbqueue.store.tracked import Refused, Unsupported, append_tracked, arrow_schema

__all__ = ["COMMIT_VERSION", "ROW_ID", "FileRange", "Inbox"]

ROW_ID = row_ids.ROW_ID  # the key a row read on the driver holds its Delta row id under
FileRange = log_reads.FileRange  # (lowest, highest batch index, rows) of one data file

# The commit that appended a row (Delta row tracking): the inbox's commit order.
COMMIT_VERSION = "_metadata.row_commit_version"
_STATS = INBOX_PROPERTIES["delta.dataSkippingStatsColumns"].split(",")
log = logging.getLogger("sbqueue.engine")


class Inbox(Table):
    """An entity's inbox table (by path), with the reads and writes the engine makes."""

    # Why the last driver append was refused for as long as the table stays as it is
    # (``tracked.Refused``: a writer feature, a schema); None after any other outcome.
    refused: str | None = None

    def create_empty(self, here: bool | None = None) -> None:
        """Create the table (``Table.create``: ``here`` where the caller knows)."""
        self.create(INBOX_SCHEMA, ["partition_id", "segment"], INBOX_PROPERTIES,
                    INBOX_PROTOCOL, here)

    def append_small(self, rows: list[dict[str, Any]], tag: str) -> int | None:
        """Append prepared rows in one commit made on the driver (``store.tracked``, no
        Spark job): the version committed; None, with nothing committed, where it cannot be
        made here: the caller appends with Spark."""
        self.refused = None
        if not self.commits_here():
            return None
        try:
            table = pa.Table.from_pylist(rows, arrow_schema(INBOX_SCHEMA))
            return append_tracked(self.path, table,
                                  ["partition_id", "segment"], tag, _STATS)
        except (Unsupported, OSError, ValueError, pa.ArrowException, DeltaError) as exc:
            # raised before the commit was published (``append_tracked`` never raises
            # after it): nothing stored, so the Spark send may store it
            self._fell_back(exc)
            return None

    def append_once(self, rows: list[dict[str, Any]], send_id: str,
                    txn: tuple[str, int] | None = None) -> bool | None:
        """``append_small`` at most once per ``send_id`` (Delta's ``txn``, as a Spark
        append with ``txnAppId``), or per ``txn`` (application id and version) where given:
        True committed now, False committed before (nothing done), None not possible here
        (nothing committed: append with Spark)."""
        self.refused = None
        if not self.commits_here():
            return None
        try:
            table = pa.Table.from_pylist(rows, arrow_schema(INBOX_SCHEMA))
            return append_tracked(self.path, table,
                                  ["partition_id", "segment"], send_id, _STATS,
                                  once=txn or (send_id, 0)) is not None
        except (Unsupported, OSError, ValueError, pa.ArrowException, DeltaError) as exc:
            self._fell_back(exc)
            return None

    def _fell_back(self, exc: Exception) -> None:
        """Note a driver append that did not commit (``refused``: why, where the table
        itself is refused)."""
        self.refused = str(exc) if isinstance(exc, Refused) else None
        log.log(logging.INFO if self.refused else logging.DEBUG,
                "driver append fell back to Spark: %r", exc)

    def holds_transaction(self, app_id: str, version: int = 0) -> bool:
        """Whether a commit carrying Delta's ``txn`` of ``app_id`` at ``version`` or later is
        in the log (read on the driver; False where it cannot be told here)."""
        if not self.commits_here():
            return False
        try:
            stored = driver.latest(self.path).transaction_version(app_id)
            return stored is not None and stored >= version
        except (OSError, ValueError, DeltaError) as exc:
            log.debug("transaction lookup fell back: %r", exc)
            return False

    def commit_ranges(self, version: int) -> dict[int, list[FileRange]] | None:
        """Per partition, the batch-index range and row count of each file commit
        ``version`` added (its log entry, no data read); None where not told here."""
        return log_reads.commit_ranges(self.path, version, "partition_id", "batch_index")

    def first_version_since(self, since: datetime, before: int, depth: int) -> int | None:
        """The oldest version after which every commit up to ``before`` was made at or
        after ``since`` (``logfiles.first_commit_since``); None where not told here."""
        if not driver.enabled(self.path):
            return None
        return first_commit_since(log_files(self.path), since, before, depth)

    def send_rows_here(self, send_id: str, columns: list[str]) -> list[dict[str, Any]] | None:
        """The rows send ``send_id`` appended (its commit carries the id), each with its row
        id (``row_ids.ROW_ID``), read on the driver; None where not told here."""
        version = self.tagged_here(send_id)
        if version is None:
            return None
        rows = row_ids.commit_rows(self.path, version, columns)
        return None if rows is None else [r for r in rows if r.get("send_id") == send_id]

    def rows_by_id_here(self, partition: int, ids: list[int], columns: list[str]
                        ) -> dict[int, dict[str, Any]] | None:
        """The rows of ``partition`` with these row ids, by id (one held by no live file is
        left out), read on the driver; None where not told here."""
        return row_ids.rows_by_id(self.path, {"partition_id": partition}, ids, columns)

    def of_send(self, send_id: str) -> DataFrame:
        """The rows one send appended."""
        return self.rows(F.col("send_id") == send_id)

    def in_order(self, where: Column | None = None) -> DataFrame:
        """Rows with ``v``, the version of the commit that appended each (commit order)."""
        return self.rows(where).withColumn("v", F.col(COMMIT_VERSION))

    def drop_segments(self, partition: int, segments: list[int]) -> None:
        """Delete whole segments of one partition (literal partition predicates)."""
        listed = ", ".join(str(int(s)) for s in segments)
        self.delete(f"partition_id = {int(partition)} AND segment IN ({listed})")
