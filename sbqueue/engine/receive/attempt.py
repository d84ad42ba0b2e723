"""What a receive asks and answers, on either executor: the attempt, its result, cursors.

An ``Attempt`` is one receive's question to a set of partitions (how many from each, in
all, under which rules' context); a ``ReceiveResult`` what it handed out. ``Cursor`` is a
partition's position in its inbox (decision 004). Spark decides an attempt in
``engine.receive.on_spark``, the driver in ``engine.receive.small``; both read the bodies
of what they handed out with ``with_bodies`` / ``collected``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from sbqueue.core.expr import Expr, col, lit
from sbqueue.core.maintenance import PAST_COMMIT
from sbqueue.core.transitions import (
    Lane,
    ReceiveContext,
)
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.schema import (
    LEDGER_COLUMNS,
    LOCATOR,
    MESSAGE_FIELDS,
    RECORD,
    TRANSACTION_SEND_PREFIX,
)

__all__ = [
    "OUTPUT_COLUMNS",
    "SLICE_COLUMNS",
    "STATE_OUT",
    "UNSTORED",
    "Attempt",
    "Cursor",
    "LapsedRanges",
    "ReceiveResult",
    "after_cursors",
    "as_aware",
    "collected",
    "cursor_expect",
    "cursors_of",
    "first_cursor",
    "is_after",
    "lock_stamp",
    "merge_scope",
    "pending_or_void",
    "slice_lanes",
    "slice_rule",
    "slice_rule_at",
    "with_bodies",
    "with_unstored",
]

class LapsedRanges(Exception):
    """A receive's read of the ledger found range locks whose lock ran out: they must
    become message rows (``receive.ranges.materialize_lapsed``) before it decides."""


WINDOW_VERSIONS = 256  # inbox commits one receive reads at most (bounded steps)
LOOKAHEAD = 256  # inbox rows examined per partition beyond the share
SESSION_LOOKAHEAD = 4096  # more for a session receive: other sessions' rows come between
PENDING = timedelta(minutes=2)  # a transaction's rows uncommitted for longer never commit
MAX_INDEX = PAST_COMMIT  # a cursor index past every batch index of its commit
P_ROW_COLUMNS = ("cursor_version", "cursor_index", "last_counter", "session_state")
CANDIDATE_COLUMNS = [c for c in LEDGER_COLUMNS if c not in P_ROW_COLUMNS and c != "row_type"]
# What a receive reads of each ledger row (``ledger_slice``).
SLICE_COLUMNS = [*CANDIDATE_COLUMNS, "row_type", "cursor_version", "cursor_index",
                 "last_counter"]
STATE_OUT = ("state", "delivery_count", "lock_token", "locked_until_utc",
              "dead_letter_reason", "dead_letter_error_description", "dead_letter_source")
OUTPUT_COLUMNS = ["sequence_number", "partition_id",
                  *[f.name for f in MESSAGE_FIELDS], *STATE_OUT]


@dataclass(frozen=True)
class Attempt:
    """What one receive attempt is asked to do."""

    partitions: list[int]
    share: int  # at most this many from each partition
    total: int  # and at most this many in all
    ctx: ReceiveContext
    lock_duration: timedelta
    latest_version: int
    pass_to: tuple[tuple[int, int], ...] = ()  # (partition, seq): the cursor passes it
    dedupe: timedelta | None = None  # the duplicate detection window (S11)
    sessions: tuple[str, ...] = ()  # only these sessions' messages, ``share`` of each (S10)
    target: str | None = None  # a subscription's entity id: its rows of the topic's inbox
    advance_idle: bool = False  # move idle cursors to the window's end even at the newest
    # Scheduled messages removed as the cursor passes them (one commit of a cancel, S8.4;
    # decided on the driver only, ``engine.receive.small.cancel``).
    cancel: tuple[int, ...] = ()

    @property
    def lookahead(self) -> int:
        """Inbox rows numbered per partition: a share of each session, and beyond it."""
        if self.sessions:
            return self.share * len(self.sessions) + SESSION_LOOKAHEAD
        return self.share + LOOKAHEAD


@dataclass(frozen=True)
class ReceiveResult:
    # State columns and locator of the rows handed out (checkpointed), or how to build
    # them: a receive decided on the driver builds them only if asked (``frame``), so it
    # runs where there is no Spark (a data source's worker) and calls no JVM otherwise.
    handed: DataFrame | Callable[[], DataFrame]
    locators: list[tuple[int, int, str]]  # (partition, segment, send_id) of those rows
    count: int
    left: dict[int, int]  # per partition: deliverable messages seen but not taken
    committed: bool
    locked_until: datetime | None = None  # what the caller is told: from the commit on
    # The handed-out messages with bodies, when the receive already read them (a receive
    # decided on the driver, ``engine.receive.small``): no body read after the commit.
    messages: list[dict[str, Any]] | None = None
    # The lowest and highest batch index handed out (``with_bodies`` reads only the files
    # and row groups holding them, not the whole send); None: not known.
    index_span: tuple[int, int] | None = None

    def frame(self) -> DataFrame:
        """The handed-out rows' state as a DataFrame."""
        return self.handed() if callable(self.handed) else self.handed


class Cursor(NamedTuple):
    """A partition's p row as read: the last inbox row passed and the counter it got."""

    partition: int
    version: int
    position: int  # batch index of that row in its commit
    counter: int
    p_version: int  # UNSTORED: no p row yet


# The row version of a cursor with no p row: an entity is created without cursor rows (one
# commit less, decision 011), so a partition's first cursor move inserts its p row.
UNSTORED = 0


def first_cursor(partition: int) -> Cursor:
    """A partition's cursor before its p row exists: nothing passed, no number given."""
    return Cursor(int(partition), 0, -1, 0, UNSTORED)


def cursors_of(rows: Iterable[Mapping[str, Any]], partitions: Iterable[int]) -> list[Cursor]:
    """The cursors of ledger rows read as dicts (their p rows), ``with_unstored``."""
    return with_unstored(
        [Cursor(*(int(r[c]) for c in ("partition_id", "cursor_version", "cursor_index",
                                      "last_counter", "row_version")))
         for r in rows if r["row_type"] == "p"], partitions)


def with_unstored(cursors: list[Cursor], partitions: Iterable[int]) -> list[Cursor]:
    """The cursors read, plus the first cursor of each partition of ``partitions`` that
    has no p row yet."""
    stored = {c.partition for c in cursors}
    return cursors + [first_cursor(p) for p in partitions if p not in stored]


def cursor_expect(p_version: int) -> int | None:
    """What a cursor move's MERGE row expects: the p row's version as read, or no row."""
    return None if p_version == UNSTORED else p_version


def pending_or_void(send_id: str, enqueued: datetime, committed: frozenset[str],
                    now: datetime) -> tuple[bool, bool]:
    """``_transaction_marks`` of one row on the driver: (pending, void)."""
    waiting = send_id.startswith(TRANSACTION_SEND_PREFIX) and send_id not in committed
    recent = enqueued > now - PENDING
    return waiting and recent, waiting and not recent


def after_cursors(cursors: list[Cursor]) -> Column:
    """Inbox rows after their partition's cursor (literals: no join, no broadcast job)."""
    return F.expr(" OR ".join(
        f"(partition_id = {int(c.partition)} AND (_commit_version > {int(c.version)}L OR "
        f"(_commit_version = {int(c.version)}L AND batch_index > {int(c.position)}L)))"
        for c in cursors) or "false")


def slice_rule(a: Attempt, lane: str) -> Expr:
    """The ledger rows a receive of ``lane`` reads (its partitions aside): the cursors and
    commit markers, the lane's completion records, and its message rows: in the main queue
    the locked and returned messages and the scheduled ones now due (and a cancel's
    targets), in a dead-letter queue all but the deferred. One home: Spark compiles it
    (``ledger_slice``), a read on the driver evaluates it (``engine.receive.small``)."""
    return slice_rule_at(a.ctx.now, lane, a.cancel)


def slice_rule_at(now: datetime, lane: str, cancel: Sequence[int] = ()) -> Expr:
    """``slice_rule`` of a receive at ``now`` cancelling ``cancel``."""
    row_type, in_lane = col("row_type"), col("lane")
    heads = ((row_type == "p") | (row_type == "t")) & (in_lane == Lane.MAIN)
    records = (row_type == RECORD) & (in_lane == lane)
    if lane == Lane.MAIN:
        due = col("scheduled_enqueue_time_utc") <= lit(now)
        wanted = (in_lane == Lane.MAIN) | ((in_lane == Lane.SCHEDULED) & due)
    else:
        wanted = (in_lane == lane) & (col("state") != "Deferred")
    for seq in cancel:
        wanted = wanted | (col("sequence_number") == seq)
    return heads | records | ((row_type == "m") & wanted)


def slice_lanes(lane: str) -> tuple[str, ...]:
    """The lanes ``slice_rule`` can accept rows of (a read prunes the others)."""
    return (Lane.MAIN, Lane.SCHEDULED) if lane == Lane.MAIN else (Lane.MAIN, lane)


def is_after(cursors: list[Cursor]) -> Callable[[Mapping[str, Any]], bool]:
    """``after_cursors`` on plain rows (a read on the driver)."""
    places = {c.partition: (c.version, c.position) for c in cursors}

    def after(row: Mapping[str, Any]) -> bool:
        place = places.get(row["partition_id"])
        return place is not None and (row["_commit_version"], row["batch_index"]) > place
    return after


def merge_scope(summary: list[tuple[int, str, int, int]]) -> str:
    """A literal predicate covering the rows that change. It leads with pure partition
    predicates (``partition_id IN (...) AND lane IN (...)``): that is what Delta's conflict
    check sees as read, so the commit conflicts only with work on those partitions; the
    per-partition sequence ranges after it serve data skipping. ``summary``: (partition,
    lane, min, max)."""
    parts: dict[int, tuple[int, int]] = {}
    lanes: set[str] = set()
    for partition, lane, low, high in summary:
        lo, hi = parts.get(partition, (low, high))
        parts[partition] = (min(lo, low), max(hi, high))
        lanes.add(lane)
    if not parts:
        return "false"
    ranges = " OR ".join(f"(t.partition_id = {int(p)} AND t.sequence_number BETWEEN "
                         f"{int(lo)} AND {int(hi)})" for p, (lo, hi) in sorted(parts.items()))
    return (f"t.partition_id IN ({', '.join(str(int(p)) for p in sorted(parts))}) "
            f"AND t.lane IN ({', '.join(repr(str(x)) for x in sorted(lanes))}) AND ({ranges})")


def span_of(indexes: Sequence[int | None]) -> tuple[int, int] | None:
    """The lowest and highest of ``indexes`` (``ReceiveResult.index_span``); None where
    there are none or one is not known."""
    known = [int(i) for i in indexes if i is not None]
    return (min(known), max(known)) if known and len(known) == len(indexes) else None


def with_bodies(inbox: Inbox, result: ReceiveResult) -> DataFrame:
    """The handed-out rows as messages: their state joined with their inbox rows, read with
    literal partition, segment, send and batch-index filters (pruning and data skipping)."""
    state = result.frame().select(*LOCATOR, "sequence_number", *STATE_OUT)
    if result.locked_until is not None:
        state = state.withColumn("locked_until_utc", F.when(
            F.col("lock_token").isNotNull(), F.lit(result.locked_until).cast("timestamp")))
    where = F.lit(False)
    if result.locators:
        where = (F.col("partition_id").isin(sorted({p for p, _, _ in result.locators}))
                 & F.col("segment").isin(sorted({s for _, s, _ in result.locators}))
                 & F.col("send_id").isin(sorted({x for _, _, x in result.locators})))
    if result.index_span is not None:  # files and row groups skipped by batch index
        where = where & F.col("batch_index").between(*result.index_span)
    return state.join(inbox.rows(where), LOCATOR).select(*OUTPUT_COLUMNS)


def collected(inbox: Inbox, result: ReceiveResult) -> list[Row]:
    """The handed-out messages as rows: those a receive decided on the driver already
    holds (no body read after its commit), else ``with_bodies`` collected."""
    if result.messages is None:
        return with_bodies(inbox, result).collect()
    until = result.locked_until
    return [Row(**{**m, "locked_until_utc": until if m["lock_token"] is not None
                   else m["locked_until_utc"]}) for m in result.messages]


def lock_stamp(now: datetime, lock_duration: timedelta, grace: float) -> datetime:
    """The locked-until written at receive: the lock's duration counted from the commit,
    which ends at most ``grace`` seconds from now (S5.2)."""
    return now + lock_duration + timedelta(seconds=grace)


def as_aware(row: Row) -> dict[str, Any]:
    """A collected row as a dict with aware UTC times (Spark hands back naive local ones),
    for the pure rules of ``sbqueue.core`` to evaluate."""
    return {k: v.astimezone(timezone.utc) if isinstance(v, datetime) else v
            for k, v in row.asDict().items()}
