"""One receive attempt on a set of partitions: read the heads, decide, commit once.

Data flow (docs/decisions/004-cursor-layout.md):

1. Candidates, narrow columns only: the ledger rows of the lanes being received (locked
   and returned messages, due scheduled ones) and the inbox rows just after each
   partition's cursor, read from the change feed of a bounded window of commits and
   numbered (``core.sequence.sequence_of``) in commit order. No body is read.
2. Picking: deliverable rows ranked by sequence number per partition; the first ``share``
   of each (and ``total`` in all) are picked; the cursor moves past the inbox rows up to
   the last one picked.
3. Outcome: ``core.transitions.receive_outcome`` applied as one projection; the changes are
   checkpointed (lock tokens fixed), then one guarded MERGE whose scope names only the
   partitions, lanes and sequence ranges that change.
4. The rows handed out are joined with their inbox rows (by locator) for the bodies.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.duplicates import DUPLICATE_GROUP, PREVIOUS_TIME, is_duplicate
from sbqueue.core.expr import Expr, col, lit
from sbqueue.core.maintenance import PAST_COMMIT
from sbqueue.core.transitions import (
    RECORD_AT,
    Lane,
    ReceiveContext,
    deliverable,
    receive_outcome,
)
from sbqueue.engine.columns import project, sequence_column, to_column
from sbqueue.engine.inbox import COMMIT_VERSION, Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.records import Record, old_record_deletes, record_at, record_rows
from sbqueue.engine.schema import (
    LEDGER_COLUMNS,
    LEDGER_TYPES,
    LOCATOR,
    MESSAGE_FIELDS,
    RECORD,
    TRANSACTION_SEND_PREFIX,
    change_frame,
    copy_of,
    owned_rows,
)
from sbqueue.store.guarded import ABSENT, EXPECT_COLUMN, OP_COLUMN

__all__ = [
    "OUTPUT_COLUMNS",
    "SLICE_COLUMNS",
    "STATE_OUT",
    "UNSTORED",
    "Attempt",
    "Cursor",
    "ReceiveResult",
    "after_cursors",
    "as_aware",
    "collected",
    "cursor_expect",
    "cursors_of",
    "deliverable_heads",
    "first_cursor",
    "is_after",
    "ledger_slice",
    "lock_stamp",
    "merge_scope",
    "pending_or_void",
    "receive_once",
    "slice_lanes",
    "slice_rule",
    "with_bodies",
    "with_unstored",
]

WINDOW_VERSIONS = 256  # inbox commits one receive reads at most (bounded steps)
LOOKAHEAD = 256  # inbox rows examined per partition beyond the share
SESSION_LOOKAHEAD = 4096  # more for a session receive: other sessions' rows come between
PENDING = timedelta(minutes=2)  # a transaction's rows uncommitted for longer never commit
MAX_INDEX = PAST_COMMIT  # a cursor index past every batch index of its commit
_P_ROW_COLUMNS = ("cursor_version", "cursor_index", "last_counter", "session_state")
_CANDIDATE_COLUMNS = [c for c in LEDGER_COLUMNS if c not in _P_ROW_COLUMNS and c != "row_type"]
# What a receive reads of each ledger row (``ledger_slice``).
SLICE_COLUMNS = [*_CANDIDATE_COLUMNS, "row_type", "cursor_version", "cursor_index",
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
    # decided on the driver only, ``engine.receive_small.cancel``).
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
    # decided on the driver, ``engine.receive_small``): no body read after the commit.
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


def _by_partition(values: dict[int, int]) -> Column:
    """A literal per-partition value (CASE partition_id WHEN ... END), NULL elsewhere. SQL
    text: one call into the JVM, not one per partition (0.4 s a receive on 16 partitions)."""
    if not values:
        return F.lit(None).cast("long")
    cases = " ".join(f"WHEN {int(p)} THEN {int(v)}L" for p, v in values.items())
    return F.expr(f"CAST(CASE partition_id {cases} END AS BIGINT)")


def _cursor_values(cursors: list[Cursor], field: str) -> Column:
    """One field of the cursors, per partition, as literals."""
    return _by_partition({c.partition: getattr(c, field) for c in cursors})


def _transaction_marks(committed: frozenset[str], now: datetime) -> dict[str, Column]:
    """``_pending`` and ``_void`` of inbox rows: a transaction's row is a message once its
    commit marker is in the ledger; until then it is pending (the cursor stops before it),
    and once the transaction can no longer commit it is void (passed, never a message).
    Its sequence number is reserved either way, so no other number ever moves (S12.2)."""
    tx = F.col("send_id").startswith(TRANSACTION_SEND_PREFIX)
    done = F.col("send_id").isin(sorted(committed)) if committed else F.lit(False)
    waiting = tx & ~done
    recent = F.col("enqueued_time_utc") > F.lit(now - PENDING).cast("timestamp")
    return {"_pending": waiting & recent, "_void": waiting & ~recent}


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


def _inbox_candidates(inbox: Inbox, cursors: list[Cursor], start: int, end: int, a: Attempt,
                      committed: frozenset[str]) -> DataFrame:
    """The inbox rows after each cursor in commits ``start..end``, numbered, at most
    ``a.lookahead`` a partition. The cursors are literals: no join, no broadcast job."""
    narrow = inbox.appended(
        start - 1, end, F.col("partition_id").isin(a.partitions) & owned_rows(a.target),
    ).select(*LOCATOR, "message_id", "session_id", "enqueued_time_utc",
             "scheduled_enqueue_time_utc", "expires_at_utc", "size_in_bytes", "_commit_version"
             ).where(after_cursors(cursors))
    if a.dedupe is not None:
        narrow = _without_duplicates(inbox, narrow, a, a.dedupe)
    rank = F.row_number().over(
        Window.partitionBy("partition_id").orderBy("_commit_version", "batch_index"))
    numbered = narrow.withColumn("_rank", rank).where(F.col("_rank") <= a.lookahead
                                                      ).withColumns(
        _transaction_marks(committed, a.ctx.now))
    counter = _cursor_values(cursors, "counter") + F.col("_rank")
    typed = {name: F.lit(None).cast(LEDGER_TYPES[name]) for name in _CANDIDATE_COLUMNS}
    typed.update({c: F.col(c) for c in (*LOCATOR, "message_id", "session_id",
                                        "enqueued_time_utc", "scheduled_enqueue_time_utc",
                                        "expires_at_utc", "size_in_bytes")})
    typed.update({
        "sequence_number": sequence_column(F.col("partition_id"), counter),
        "row_version": F.lit(0).cast("long"), "state": F.lit("Active"),
        "delivery_count": F.lit(0), "lane": F.lit(None).cast("string"),
    })
    return numbered.select(
        *[typed[c].alias(c) for c in _CANDIDATE_COLUMNS], F.lit("inbox").alias("origin"),
        F.col("_commit_version"), F.col("batch_index").alias("_index"),
        counter.alias("_counter"), _cursor_values(cursors, "p_version").alias("_p_version"),
        "_pending", "_void", F.lit(None).cast("timestamp").alias(RECORD_AT))


def _without_duplicates(inbox: Inbox, narrow: DataFrame, a: Attempt, window: timedelta
                        ) -> DataFrame:
    """The head rows that are not duplicates (S11.2, ``core.duplicates``). The previous
    copy of a head row was sent at most a window before the oldest head row: only inbox
    rows of that time range are read (data skipping on enqueued time), never the backlog.
    On a subscription, a message's plain copy and each rule copy are compared apart.
    """
    narrow = narrow.localCheckpoint()
    bounds = narrow.agg(F.min("enqueued_time_utc"), F.max("enqueued_time_utc")).first()
    if bounds is None or bounds[0] is None:
        return narrow
    recent = inbox.rows(
        F.col("partition_id").isin(a.partitions) & owned_rows(a.target)
        & ~F.col("send_id").startswith(TRANSACTION_SEND_PREFIX)  # checked at commit
        & F.col("enqueued_time_utc").between(F.lit(bounds[0] - window), F.lit(bounds[1]))
    ).select(*LOCATOR, *DUPLICATE_GROUP[1:], "enqueued_time_utc",
             F.col(COMMIT_VERSION).alias("_v"),
             copy_of(a.target).alias("_copy"))
    order = Window.partitionBy(*DUPLICATE_GROUP, "_copy").orderBy("_v", "batch_index")
    copies = recent.withColumn(PREVIOUS_TIME, F.lag("enqueued_time_utc").over(order)).where(
        to_column(is_duplicate(window))).select(*LOCATOR)
    return narrow.join(copies, LOCATOR, "left_anti")


def slice_rule(a: Attempt, lane: str) -> Expr:
    """The ledger rows a receive of ``lane`` reads (its partitions aside): the cursors and
    commit markers, the lane's completion records, and its message rows: in the main queue
    the locked and returned messages and the scheduled ones now due (and a cancel's
    targets), in a dead-letter queue all but the deferred. One home: Spark compiles it
    (``ledger_slice``), a read on the driver evaluates it (``engine.receive_small``)."""
    row_type, in_lane = col("row_type"), col("lane")
    heads = ((row_type == "p") | (row_type == "t")) & (in_lane == Lane.MAIN)
    records = (row_type == RECORD) & (in_lane == lane)
    if lane == Lane.MAIN:
        due = col("scheduled_enqueue_time_utc") <= lit(a.ctx.now)
        wanted = (in_lane == Lane.MAIN) | ((in_lane == Lane.SCHEDULED) & due)
    else:
        wanted = (in_lane == lane) & (col("state") != "Deferred")
    for seq in a.cancel:
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


def _pick(candidates: DataFrame, a: Attempt) -> DataFrame:
    """Add ``_picked`` and ``_passed``: the rows handed out and the inbox rows the cursor
    moves past. Ranks are by sequence number, so returned messages come first (S5.5)."""
    by_partition = Window.partitionBy("partition_id")
    seq = F.col("sequence_number")
    # Nothing at or after a transaction still committing: its rows may yet be messages,
    # and the cursor cannot pass them.
    first_pending = F.min(F.when(F.col("_pending"), seq)).over(by_partition)
    candidates = candidates.withColumn("_first_pending", first_pending)
    ok = (to_column(deliverable(a.ctx)) & ~F.col("_void")
          & (F.col("_first_pending").isNull() | (seq < F.col("_first_pending"))))
    share_of = ["partition_id", "_ok"]
    if a.sessions:  # a session's messages in strict sequence order (S10.4)
        ok = ok & F.col("session_id").isin(list(a.sessions))
        share_of.append("session_id")
    marked = candidates.withColumn("_ok", F.coalesce(ok, F.lit(False)))
    marked = marked.withColumn("_rank", F.row_number().over(
        Window.partitionBy(*share_of).orderBy("sequence_number")))
    marked = marked.withColumn("_picked", F.col("_ok") & (F.col("_rank") <= a.share))
    if not a.sessions and a.total < a.share * len(a.partitions):
        # Fewer wanted than a share from every partition: the first picks of each, across
        # partitions from a random one on, up to ``total``.
        rotated = F.pmod(F.col("partition_id") + random.randrange(1 << 16), F.lit(1 << 16))
        order = Window.orderBy(F.col("_picked").desc(), "_rank", rotated)
        marked = marked.withColumn(
            "_picked", F.col("_picked") & (F.row_number().over(order) <= a.total))
    inbox = F.col("origin") == "inbox"
    last_picked = F.max(F.when(F.col("_picked") & inbox, seq)).over(by_partition)
    # The cursor passes what it hands out and every inbox row before the first one it could
    # hand out (expired ones retire, future ones wait in the ledger); all, when none could.
    first_ok = F.min(F.when(F.col("_ok") & inbox, seq)).over(by_partition)
    last_inbox = F.max(F.when(inbox, seq)).over(by_partition)
    limit = F.greatest(F.coalesce(last_picked, F.lit(-1)),
                       F.coalesce(first_ok - 1, last_inbox))
    if a.pass_to:  # moved past without handing out (to cancel a scheduled message)
        floor = F.coalesce(_by_partition(dict(a.pass_to)), F.lit(-1))
        limit = F.greatest(limit, floor)
    pending = F.col("_first_pending")
    limit = F.when(pending.isNull(), limit).otherwise(F.least(limit, pending - 1))
    left = F.sum((F.col("_ok") & ~F.col("_picked")).cast("int")).over(by_partition)
    passed = inbox & (seq <= limit)
    # The row the cursor moves to, marked here so that the cursor change is a filter of the
    # checkpointed decision, not a second aggregation (no shuffle when the MERGE re-reads it).
    last_passed = F.max(F.when(passed, seq)).over(by_partition)
    return marked.withColumns({"_passed": passed, "_left": left}).withColumn(
        "_cursor_to", F.col("_passed") & (seq == last_passed)).drop("_ok", "_rank",
                                                                     "_first_pending")


def _cursor_rows(rows: DataFrame, version: Column, index: Column, counter: Column
                 ) -> DataFrame:
    """p-row upserts moving each partition of ``rows`` (which carry ``_p_version``, the
    p row's version as read) to the given cursor."""
    return rows.select(
        "partition_id", F.lit(Lane.MAIN).alias("lane"),
        sequence_column(F.col("partition_id"), F.lit(0)).alias("sequence_number"),
        F.lit("p").alias("row_type"), (F.col("_p_version") + 1).alias("row_version"),
        version.cast("long").alias("cursor_version"), index.cast("long").alias("cursor_index"),
        counter.cast("long").alias("last_counter"),
        F.when(F.col("_p_version") != UNSTORED, F.col("_p_version")).alias(EXPECT_COLUMN),
        F.lit("upsert").alias(OP_COLUMN), F.lit(Lane.MAIN).alias("_old_lane"),
        F.lit(False).alias("_handed"))


def _cursor_changes(decided: DataFrame) -> DataFrame:
    """The p row of each partition whose cursor moved: to the last inbox row passed (a
    filter of the checkpointed decision, so re-reading it costs no join)."""
    return _cursor_rows(decided.where(F.col("_cursor_to")), F.col("_commit_version"),
                        F.col("_index"), F.col("_counter"))


def _idle_cursors(decided: DataFrame, cursors: list[Cursor], end: int) -> DataFrame:
    """Cursors of partitions that had no inbox row in a window that stopped short of the
    newest commit (or, for maintenance, any window): they move past the window's end, so
    the next receive reads further, no partition is left behind (the window is a bounded
    step) and the segments behind them can be dropped (``engine.maintain``)."""
    busy = {int(r[0]) for r in decided.where(F.col("origin") == "inbox")
            .select("partition_id").distinct().collect()}
    idle = decided.sparkSession.createDataFrame(
        [(c.partition, c.counter, c.p_version) for c in cursors
         if c.partition not in busy and (c.version, c.position) < (end, MAX_INDEX)],
        "partition_id int, _counter long, _p_version long")
    return _cursor_rows(idle, F.lit(end), F.lit(MAX_INDEX), F.col("_counter"))


def ledger_slice(ledger: Ledger, a: Attempt, lane: str) -> DataFrame:
    """What a receive of ``lane`` reads of the ledger (``slice_rule``), narrow."""
    return ledger.rows(F.col("partition_id").isin(a.partitions)).where(
        to_column(slice_rule(a, lane))).select(*SLICE_COLUMNS)


def _read_ledger(ledger: Ledger, a: Attempt, lane: str
                 ) -> tuple[DataFrame, list[Cursor], frozenset[str], list[Record]]:
    """(the candidate ledger rows, checkpointed, each with the time of its completion
    record if any; the cursors; the send ids of committed transactions; the completion
    records of ``lane``). One scan of the ledger, narrow columns only."""
    slice_ = ledger_slice(ledger, a, lane).localCheckpoint()
    rows = slice_.where(F.col("row_type") != "m").select(
        "row_type", "partition_id", "cursor_version", "cursor_index", "last_counter",
        "row_version", "send_id", "sequence_number", "lock_token", "enqueued_time_utc"
    ).collect()
    cursors = with_unstored([Cursor(*(int(v) for v in r[1:6])) for r in rows if r[0] == "p"],
                            a.partitions)
    committed = frozenset(str(r[6]) for r in rows if r[0] == "t")
    found = record_rows(rows)
    candidates = slice_.where(F.col("row_type") == "m").select(
        *_CANDIDATE_COLUMNS, F.lit("ledger").alias("origin"),
        *[F.lit(None).cast("long").alias(c)
          for c in ("_commit_version", "_index", "_counter", "_p_version")],
        F.lit(False).alias("_pending"), F.lit(False).alias("_void"),
        record_at(found).alias(RECORD_AT))
    return candidates, cursors, committed, found


def _candidates(ledger: Ledger, inbox: Inbox, a: Attempt, lane: str
                ) -> tuple[DataFrame, list[Cursor], int, list[Record]]:
    """(every row a receive of ``lane`` considers: its ledger rows and, in the main queue,
    the inbox rows after each cursor; the cursors; the last inbox commit read; the
    completion records read)."""
    candidates, cursors, committed, found = _read_ledger(ledger, a, lane)
    start = min((c.version for c in cursors), default=0)
    end = min(a.latest_version, start + WINDOW_VERSIONS)  # a bounded step (issue 5)
    if lane == Lane.MAIN:
        candidates = candidates.unionByName(
            _inbox_candidates(inbox, cursors, start, end, a, committed))
    return candidates, cursors, end, found


def deliverable_heads(ledger: Ledger, inbox: Inbox, a: Attempt) -> DataFrame:
    """The messages a receive of the main queue could hand out now, at the head of each
    partition (``a.lookahead`` inbox rows after each cursor): narrow columns, no commit.
    Sessions with available messages are found here (S10.2)."""
    heads, _, _, _ = _candidates(ledger, inbox, a, Lane.MAIN)
    ok = to_column(deliverable(a.ctx)) & ~F.col("_pending") & ~F.col("_void")
    return heads.where(F.coalesce(ok, F.lit(False)))


def _changes(ledger: Ledger, inbox: Inbox, a: Attempt, lane: str) -> DataFrame:
    """The change rows of one attempt; the decision is checkpointed once, so lock tokens
    are drawn once and every later use reads the same rows."""
    candidates, cursors, end, found = _candidates(ledger, inbox, a, lane)
    decided = _pick(candidates.withColumn("_new_token", F.expr("uuid()")), a)
    decided = decided.withColumns({"_old_lane": F.col("lane"), "_old_token": F.col("lock_token"),
                                   "_read_version": F.col("row_version")}).localCheckpoint()
    outcome = project(decided, receive_outcome(a.ctx), LEDGER_TYPES)
    # The guard expects the version as read; a row from the inbox must not exist yet.
    messages = outcome.where(F.col(OP_COLUMN).isNotNull() | F.col("_handed")).select(
        *_CANDIDATE_COLUMNS, F.lit("m").alias("row_type"),
        *[F.lit(None).cast(LEDGER_TYPES[c]).alias(c) for c in _P_ROW_COLUMNS],
        F.when(F.col("origin") == "ledger", F.col("_read_version")).alias(EXPECT_COLUMN),
        OP_COLUMN, "_old_lane", "_handed", "_left")
    messages = messages.unionByName(_no_new_records(outcome), allowMissingColumns=True)
    old = old_record_deletes(found, lane, a.ctx.now)
    if old:  # folded, or never valid: nobody reads them back any more
        messages = messages.unionByName(change_frame(ledger.spark, old).withColumns(
            {"_old_lane": F.col("lane"), "_handed": F.lit(False)}), allowMissingColumns=True)
    if lane == Lane.MAIN:
        messages = messages.unionByName(_cursor_changes(decided), allowMissingColumns=True)
        if end < a.latest_version or a.advance_idle:
            messages = messages.unionByName(_idle_cursors(decided, cursors, end),
                                            allowMissingColumns=True)
    return messages


def _no_new_records(outcome: DataFrame) -> DataFrame:
    """Guard rows: for each locked row this receive changes without having read a record of
    its lock, "no completion record of that lock exists". A record appended after the
    ledger was read but before the MERGE took its snapshot is not a change to the row
    itself, so the row-version guard would not see it; this one makes the MERGE fail
    (StaleRead, then a fresh read) instead of re-locking a completed message. A record
    landing after the MERGE's snapshot is Delta's conflict (decision 011)."""
    return outcome.where(
        F.col(OP_COLUMN).isNotNull() & (F.col("origin") == "ledger")
        & F.col("_old_token").isNotNull() & F.col(RECORD_AT).isNull()).select(
        "partition_id", F.col("_old_lane").alias("lane"), "sequence_number",
        F.lit(RECORD).alias("row_type"), F.lit(0).cast("long").alias("row_version"),
        F.col("_old_token").alias("lock_token"), F.lit(None).cast("long").alias(EXPECT_COLUMN),
        F.lit(ABSENT).alias(OP_COLUMN), "_old_lane", F.lit(False).alias("_handed"))


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


def receive_once(ledger: Ledger, inbox: Inbox, a: Attempt, lane: str = Lane.MAIN
                 ) -> ReceiveResult:
    """Run one attempt; raises StaleRead or a Delta conflict if it lost a race."""
    if a.cancel:  # only the driver removes targets as it passes them
        raise ValueError("a cancel is decided on the driver (receive_small.cancel)")
    changes = _changes(ledger, inbox, a, lane)
    # One small query tells both what to commit (per partition and lane as read: the
    # sequence range) and where the handed-out bodies are (partition, segment, send).
    # Rows taken from the inbox count with the lane they go to: a row already there (a
    # number handed out before) is then matched, and the guard aborts the commit.
    summary = changes.groupBy(
        "partition_id", F.coalesce("_old_lane", "lane").alias("_old_lane"),
        F.when(F.col("_handed"), F.col("segment")).alias("seg"),
        F.when(F.col("_handed"), F.col("send_id")).alias("send")).agg(
        F.min("sequence_number").alias("low"), F.max("sequence_number").alias("high"),
        F.sum(F.col(OP_COLUMN).isNotNull().cast("int")).alias("writes"),
        F.sum(F.col("_handed").cast("int")).alias("handed"),
        F.min(F.when(F.col("_handed"), F.col("batch_index"))).alias("lo"),
        F.max(F.when(F.col("_handed"), F.col("batch_index"))).alias("hi"),
        F.max("_left").alias("left")).collect()
    handed_count = sum(int(r["handed"]) for r in summary)
    committed, told = False, None
    if any(int(r["writes"]) for r in summary):
        written = [(int(r["partition_id"]), str(r["_old_lane"]), int(r["low"]), int(r["high"]))
                   for r in summary if r["_old_lane"] is not None and int(r["writes"])]
        ledger.merge_changes(merge_scope(written), changes.where(F.col(OP_COLUMN).isNotNull()))
        committed = True
        # The lock's clock starts when the commit succeeded (S5.2): the caller is told
        # commit end + duration; the stored time, stamped before, is later still unless
        # the commit outlasted the grace.
        told = min(a.ctx.locked_until, utcnow() + a.lock_duration)
    locators = sorted({(int(r["partition_id"]), int(r["seg"]), str(r["send"]))
                       for r in summary if int(r["handed"]) and r["seg"] is not None})
    left = dict.fromkeys(a.partitions, 0)
    for r in summary:
        left[int(r["partition_id"])] = max(left[int(r["partition_id"])], int(r["left"] or 0))
    ends = [r[end] for r in summary if int(r["handed"]) for end in ("lo", "hi")]
    return ReceiveResult(handed=changes.where(F.col("_handed")), locators=locators,
                         count=handed_count, left=left, committed=committed,
                         locked_until=told if a.ctx.peek_lock else None,
                         index_span=span_of(ends))


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
