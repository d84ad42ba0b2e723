"""Changes decided from an earlier read, applied only if what was read still stands.

The contract (DESIGN facts 2, 3): a change set carries, per row, the operation
(``OP_COLUMN``) and the ``row_version`` read (``EXPECT_COLUMN``); applying it commits every
change or, if any row it touches changed since that read, nothing (``StaleRead``).

- ``guarded_merge``: the contract as one Delta MERGE in Spark, scoped by literal predicates
  so that it conflicts only with concurrent work inside that scope;
- ``apply_guarded``: the same contract on rows held on the driver (a rewrite by delta-rs);
- ``retry_conflicts``: re-run an operation on a Delta conflict or a stale read, a bounded
  number of attempts, with jitter; ``conflicts_retried`` counts them for the benchmarks.

Knows nothing of Service Bus names.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import delta.exceptions as dx
from pyspark.sql import DataFrame, SparkSession

from sbqueue.exceptions import StorageConflictError
from sbqueue.store import deadline
from sbqueue.store.sql import spark_writes, sql_name, with_view

__all__ = [
    "ABSENT",
    "DELETE_IF",
    "DELTA_CONFLICTS",
    "EXPECT_COLUMN",
    "OP_COLUMN",
    "RETRYABLE",
    "ROW_VERSION",
    "StaleRead",
    "apply_guarded",
    "conflicts_retried",
    "guarded_merge",
    "merge_into",
    "note_conflict",
    "retry_conflicts",
]

# The eight conflict classes share no Python base class (DESIGN fact 3).
DELTA_CONFLICTS: tuple[type[BaseException], ...] = (
    dx.ConcurrentAppendException,
    dx.ConcurrentDeleteDeleteException,
    dx.ConcurrentDeleteReadException,
    dx.ConcurrentTransactionException,
    dx.ConcurrentWriteException,
    dx.DeltaConcurrentModificationException,
    dx.MetadataChangedException,
    dx.ProtocolChangedException,
)

OP_COLUMN = "_op"  # 'upsert', 'delete', DELETE_IF or ABSENT
ABSENT = "absent"  # a change row that only checks: no row with its keys exists
DELETE_IF = "delete_if"  # delete the row if it exists and ``delete_if`` holds; else nothing
EXPECT_COLUMN = "_expect"  # the row_version read; null for a row that must not exist yet
_STALE_MARK = "sbqueue-stale-row"
ROW_VERSION = "row_version"  # each stored row's version: what EXPECT_COLUMN is checked against

T = TypeVar("T")


class StaleRead(Exception):
    """A guarded MERGE found a row changed since it was read; nothing was committed."""


RETRYABLE: tuple[type[BaseException], ...] = (StaleRead, *DELTA_CONFLICTS)

log = logging.getLogger("sbqueue.store")
_conflicts = [0]
_conflicts_lock = threading.Lock()


def note_conflict(what: str, exc: BaseException) -> None:
    """Record a conflict that sbqueue handles (retries, or moves on from): a DEBUG line and
    a process-wide count, nothing on the user's output (issue 17)."""
    with _conflicts_lock:
        _conflicts[0] += 1
    log.debug("%s: %s, retried", what, exc.__class__.__name__)


def conflicts_retried() -> int:
    """How many handled conflicts this process has seen (benchmarks report it)."""
    return _conflicts[0]


def guarded_merge(
    spark: SparkSession,
    path: str,
    scope: str,
    keys: Sequence[str],
    changes: DataFrame,
    columns: Sequence[str],
    match: str = "",
    delete_if: str = "false",
) -> dict[str, int]:
    """Apply ``changes`` in one commit, or raise StaleRead and commit nothing.

    ``scope`` is a SQL predicate on the target ``t`` made of literals only (partition
    values, and key ranges for data skipping): Delta prunes files with it and records it as
    what the commit read, so it conflicts only with concurrent work inside that scope
    (DESIGN fact 2). ``keys`` identify a row, with ``match`` (SQL on ``t`` and ``s``) where
    equal keys are not enough.

    ``changes`` holds full rows (``columns``) plus OP_COLUMN and EXPECT_COLUMN. A row whose
    stored ``row_version`` differs from EXPECT_COLUMN (or exists when it was expected not
    to, or vanished when it was expected to exist) makes the MERGE fail before commit. A
    row with OP_COLUMN ``ABSENT`` (and no EXPECT_COLUMN) changes nothing: it only fails the
    MERGE if a row with its keys exists. A row with OP_COLUMN ``DELETE_IF`` deletes the row
    with its keys if there is one and ``delete_if`` (SQL on ``t`` and ``s``) holds, and
    otherwise changes nothing, checks nothing: for a change decided without reading the row.
    """
    stale = f"CAST(raise_error(concat('{_STALE_MARK} ', s.{keys[0]})) AS BIGINT)"
    condition = " AND ".join([f"({scope})", *[f"t.{k} = s.{k}" for k in keys],
                              *([f"({match})"] if match else [])])
    names = ", ".join(f"`{c}`" for c in columns)
    values = {c: f"s.`{c}`" for c in columns}
    staled = ", ".join(stale if c == ROW_VERSION else v for c, v in values.items())
    clauses = [
        f"WHEN MATCHED AND s.{OP_COLUMN} = '{DELETE_IF}' AND ({delete_if}) THEN DELETE",
        f"WHEN MATCHED AND s.{OP_COLUMN} <> '{DELETE_IF}' AND (s.{EXPECT_COLUMN} IS NULL "
        f"OR t.{ROW_VERSION} <> s.{EXPECT_COLUMN}) THEN UPDATE SET t.{ROW_VERSION} = {stale}",
        f"WHEN MATCHED AND s.{OP_COLUMN} = 'delete' THEN DELETE",
        f"WHEN MATCHED AND s.{OP_COLUMN} = 'upsert' THEN UPDATE SET "
        + ", ".join(f"t.`{c}` = {v}" for c, v in values.items()),
        f"WHEN NOT MATCHED AND s.{EXPECT_COLUMN} IS NOT NULL THEN INSERT ({names}) "
        f"VALUES ({staled})",
        f"WHEN NOT MATCHED AND s.{OP_COLUMN} = 'upsert' THEN INSERT ({names}) "
        f"VALUES ({', '.join(values.values())})",
    ]
    try:
        result = merge_into(changes, path, condition, clauses)
    except Exception as exc:
        if _STALE_MARK in str(exc):
            raise StaleRead(str(exc).split(_STALE_MARK, 1)[1][:80].strip()) from None
        raise
    row = result.first()
    return {k: int(v) for k, v in row.asDict().items()} if row else {}


def merge_into(source: DataFrame, path: str, condition: str, clauses: Sequence[str]
           ) -> DataFrame:
    """One ``MERGE INTO`` the table at ``path`` (alias ``t``) from ``source`` (alias ``s``);
    its metrics row."""
    deadline.check()
    target = sql_name(spark_writes(source.sparkSession, path))
    return with_view(source, lambda view: source.sparkSession.sql(
        f"MERGE INTO {target} t USING {view} s ON {condition} "
        + " ".join(clauses)))


def apply_guarded(
    stored: list[dict[str, Any]],
    changes: list[dict[str, Any]],
    keys: Sequence[str],
    columns: Sequence[str],
    match: Callable[[Mapping[str, Any], Mapping[str, Any]], bool],
    delete_if: Callable[[Mapping[str, Any], Mapping[str, Any]], bool],
) -> list[dict[str, Any]]:
    """``guarded_merge``'s contract on rows held on the driver: ``stored`` (every row of the
    partitions a rewrite replaces, as read) after ``changes``, or StaleRead. ``match`` and
    ``delete_if`` are the MERGE's ``match`` and ``delete_if`` on (target, source) rows."""
    rows = list(stored)
    where: dict[tuple[Any, ...], list[int]] = {}
    for i, row in enumerate(rows):
        where.setdefault(tuple(row[k] for k in keys), []).append(i)
    gone: set[int] = set()
    added: list[dict[str, Any]] = []
    for change in changes:
        op, expect = change[OP_COLUMN], change[EXPECT_COLUMN]
        hits = [i for i in where.get(tuple(change[k] for k in keys), [])
                if i not in gone and match(rows[i], change)]
        if not hits:
            if expect is not None:
                raise StaleRead(f"{change[keys[0]]} (expected, not found)")
            if op == "upsert":
                added.append({c: change.get(c) for c in columns})
            continue
        for i in hits:
            if op == DELETE_IF:
                if delete_if(rows[i], change):
                    gone.add(i)
            elif expect is None or rows[i][ROW_VERSION] != expect:
                raise StaleRead(f"{change[keys[0]]} (changed since read)")
            elif op == "delete":
                gone.add(i)
            elif op == "upsert":
                rows[i] = {c: change.get(c) for c in columns}
    return [row for i, row in enumerate(rows) if i not in gone] + added


def retry_conflicts(
    operation: Callable[[], T],
    *,
    what: str,
    attempts: int = 8,
    base_delay: float = 0.05,
) -> T:
    """Run ``operation`` until it commits, at most ``attempts`` times; between attempts back
    off with jitter. Counting attempts, not seconds, means one slow attempt cannot use up
    the budget of the others. The operation must re-read what it depends on each time.
    """
    for attempt in range(1, attempts + 1):
        try:
            return operation()
        except RETRYABLE as exc:
            note_conflict(what, exc)
            if attempt == attempts:
                raise StorageConflictError(
                    f"{what} conflicted with concurrent writers {attempts} times; last: "
                    f"{exc.__class__.__name__}") from exc
            delay = min(2.0, base_delay * (2 ** min(attempt, 6)))
            time.sleep(delay * (0.5 + random.random()))
    raise AssertionError("unreachable")
