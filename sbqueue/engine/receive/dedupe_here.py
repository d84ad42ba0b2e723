"""Duplicate detection (S11.2) for a receive decided on the driver: the head rows that are
not duplicates, read and decided without a Spark job.

Spark's receive (``engine.receive.attempt._without_duplicates``) reads the inbox rows sent in the
window before the head and, per duplicate group and copy, takes each row's previous row in
commit order (commit version, then batch index): a row whose previous one came at most a
window before it is a duplicate (``core.duplicates.is_duplicate``, the rule's one home).
Here the same rows come from the change feed of the commits that can hold them: a row sent
at a time was committed at or after it, so the commits made before the window's start
(less a margin for the clocks of different writers) hold none. The walk back over the log
is bounded; a window that reaches further, or a read over ``ROW_LIMIT`` rows, is Spark's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sbqueue.core.duplicates import DUPLICATE_GROUP, PREVIOUS_TIME, is_duplicate
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.receive.attempt import Attempt
from sbqueue.engine.schema import COPY_BITS, LOCATOR, TRANSACTION_SEND_PREFIX, owns
from sbqueue.store.thresholds import ROW_LIMIT, WALK_COMMITS

__all__ = ["CLOCK_MARGIN", "WALK_COMMITS", "without_duplicates_here"]

CLOCK_MARGIN = timedelta(minutes=1)  # a commit's time may trail its rows' sending this much

Row = dict[str, Any]


def without_duplicates_here(inbox: Inbox, head: list[Row], a: Attempt, window: timedelta,
                            end: int) -> list[Row] | None:
    """``head`` (rows read up to commit ``end``, with the locator and enqueued time)
    without its duplicates; None when the rows to compare with cannot be read here."""
    if not head:
        return head
    times = [r["enqueued_time_utc"] for r in head]
    low, high = min(times) - window, max(times)
    first = inbox.first_version_since(low - CLOCK_MARGIN, end, WALK_COMMITS)
    if first is None:
        return None
    recent = _recent(inbox, a, first, end, low, high)
    if recent is None:
        return None
    duplicates = _duplicates(recent, a.target, window)
    return [r for r in head if _locator(r) not in duplicates]


def _recent(inbox: Inbox, a: Attempt, first: int, end: int, low: datetime, high: datetime
            ) -> list[Row] | None:
    """The rows of ``a``'s partitions appended in commits ``first..end`` and sent between
    ``low`` and ``high``, in commit order (a transaction's sends are checked at its
    commit); None past ``ROW_LIMIT``."""
    partitions = set(a.partitions)

    def keep(r: Row) -> bool:
        return (r["partition_id"] in partitions and owns(a.target, r["targets"])
                and not str(r["send_id"]).startswith(TRANSACTION_SEND_PREFIX)
                and low <= r["enqueued_time_utc"] <= high)

    rows = inbox.appended_here(
        first - 1, end, [*LOCATOR, "message_id", "partition_key", "enqueued_time_utc",
                         "targets"],
        keep, ("_commit_version", "batch_index"), ROW_LIMIT)
    return None if rows is None or len(rows) >= ROW_LIMIT else rows


def _duplicates(recent: list[Row], target: str | None, window: timedelta
                ) -> set[tuple[Any, ...]]:
    """The locators of the rows whose group's previous row (in ``recent``'s order) makes
    them duplicates."""
    rule = is_duplicate(window)
    previous: dict[tuple[Any, ...], datetime] = {}
    found = set()
    for r in recent:
        copy = 0 if target is None else int(r["batch_index"]) & ((1 << COPY_BITS) - 1)
        group = (*(r[c] for c in DUPLICATE_GROUP), copy)
        before = previous.get(group)
        if rule.evaluate({PREVIOUS_TIME: before,
                          "enqueued_time_utc": r["enqueued_time_utc"]}) is True:
            found.add(_locator(r))
        previous[group] = r["enqueued_time_utc"]
    return found


def _locator(row: Row) -> tuple[Any, ...]:
    return tuple(row[c] for c in LOCATOR)
