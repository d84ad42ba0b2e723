"""A peek read on the driver: the view's rows (``engine.reads.view_here``), chosen and ordered
as ``Entity.peek_dataframe`` chooses and orders them, with no Spark job.

Why (decision 026): the client's ``peek_messages`` collected ``peek_dataframe``, the SQL
view's SELECT with a sort: 13-20 Spark jobs, several seconds a call under load, for what is
meant as the cheapest call of the SDK. Where ``view_rows_here`` can read the entity (local
tables of moderate size, no duplicate detection, no forwarding windows) the same rows are
filtered and sorted here; elsewhere the caller peeks through the view as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import Row

from sbqueue.core.clock import as_utc
from sbqueue.core.sequence import partition_of
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.reads.view import MESSAGE_VIEW_COLUMNS
from sbqueue.engine.reads.view_here import view_rows_here, with_payloads

__all__ = ["peek_here", "peeked"]

_ROW = Row(*MESSAGE_VIEW_COLUMNS)  # the view's columns, in its order
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def peek_here(inbox: Inbox, ledger: Ledger, partitions: int, target: str | None,
              now: datetime, sub_queue: str, max_messages: int,
              from_sequence: int | None = None, after: tuple[datetime, int] | None = None,
              session_id: str | None = None) -> list[Row] | None:
    """The peek's rows as ``peek_dataframe(...).collect()`` returns them (times aware UTC,
    bodies ``bytes``, where Spark hands back naive local times and ``bytearray``); None
    where only the view can tell (see the module's docstring). The entity must not detect
    duplicates: which copy the view drops is Spark's to decide. Only the chosen rows'
    bodies are read, so a peek of a few messages holds a few bodies."""
    scope = [partition_of(from_sequence)] if from_sequence is not None else range(partitions)
    rows = view_rows_here(inbox, ledger, list(scope), target, now, narrow=True)
    if rows is None:
        return None
    chosen = with_payloads(inbox, peeked(rows, sub_queue, max_messages, from_sequence,
                                         after, session_id))
    if chosen is None:
        return None
    return [_ROW(*(row[c] for c in MESSAGE_VIEW_COLUMNS)) for row in chosen]


def peeked(rows: Iterable[dict[str, Any]], sub_queue: str, max_messages: int,
           from_sequence: int | None = None, after: tuple[datetime, int] | None = None,
           session_id: str | None = None) -> list[dict[str, Any]]:
    """The view rows a peek shows (S9.1-S9.3): of ``sub_queue`` (and ``session_id``), from
    ``from_sequence`` on within its partition, or strictly after ``after`` (enqueued time,
    sequence number); in enqueued-time then sequence order, at most ``max_messages``."""
    kept = [r for r in rows if r["sub_queue"] == sub_queue
            and (session_id is None or r["session_id"] == session_id)]
    if from_sequence is not None:
        part = partition_of(from_sequence)
        kept = [r for r in kept if r["partition_id"] == part
                and r["sequence_number"] >= from_sequence]
    if after is not None:
        mark = (as_utc(after[0]), after[1])
        kept = [r for r in kept if r["enqueued_time_utc"] is not None
                and (as_utc(r["enqueued_time_utc"]), r["sequence_number"]) > mark]
    return sorted(kept, key=_order)[:max(0, max_messages)]


def _order(row: Mapping[str, Any]) -> tuple[bool, datetime, int]:
    """Spark's ascending order: a null time first, then by time, then by number."""
    at = row["enqueued_time_utc"]
    return (at is not None, as_utc(at) if at is not None else _EPOCH, int(row["sequence_number"]))

