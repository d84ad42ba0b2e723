"""One receive attempt decided by Spark: candidates, picking, outcome and one MERGE.

Data flow (docs/decisions/004-cursor-layout.md):

1. Candidates, narrow columns only: the ledger rows of the lanes being received (locked
   and returned messages, due scheduled ones) and the inbox rows just after each
   partition's cursor, read from the change feed of a bounded window of commits and
   numbered (``core.sequence.sequence_of``) in commit order. No body is read.
2. Picking: deliverable rows ranked by sequence number per partition; the first ``share``
   of each (and ``total`` in all) are picked; the cursor moves past the inbox rows up to
   the last one picked.
3. Outcome: ``core.transitions.receive_outcome`` applied as one projection; the changes
   are committed in one guarded MERGE over the partitions, lanes and sequence ranges
   that change.

The same decision on plain rows, for a receive of a few messages, is
``engine.receive.small``; what both ask and answer is ``engine.receive.attempt``.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.duplicates import DUPLICATE_GROUP, PREVIOUS_TIME, is_duplicate
from sbqueue.core.transitions import RECORD_AT, Lane, deliverable, receive_outcome
from sbqueue.engine.columns import project, sequence_column, to_column
from sbqueue.engine.inbox import COMMIT_VERSION, Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.receive.attempt import (
    CANDIDATE_COLUMNS,
    MAX_INDEX,
    P_ROW_COLUMNS,
    PENDING,
    SLICE_COLUMNS,
    UNSTORED,
    WINDOW_VERSIONS,
    Attempt,
    Cursor,
    ReceiveResult,
    after_cursors,
    merge_scope,
    slice_rule,
    span_of,
    with_unstored,
)
from sbqueue.engine.records import Record, old_record_deletes, record_at, record_rows
from sbqueue.engine.schema import (
    LEDGER_TYPES,
    LOCATOR,
    RECORD,
    TRANSACTION_SEND_PREFIX,
    change_frame,
    copy_of,
    owned_rows,
)
from sbqueue.store.guarded import ABSENT, EXPECT_COLUMN, OP_COLUMN

__all__ = ["deliverable_heads", "ledger_slice", "receive_once"]


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
    typed = {name: F.lit(None).cast(LEDGER_TYPES[name]) for name in CANDIDATE_COLUMNS}
    typed.update({c: F.col(c) for c in (*LOCATOR, "message_id", "session_id",
                                        "enqueued_time_utc", "scheduled_enqueue_time_utc",
                                        "expires_at_utc", "size_in_bytes")})
    typed.update({
        "sequence_number": sequence_column(F.col("partition_id"), counter),
        "row_version": F.lit(0).cast("long"), "state": F.lit("Active"),
        "delivery_count": F.lit(0), "lane": F.lit(None).cast("string"),
    })
    return numbered.select(
        *[typed[c].alias(c) for c in CANDIDATE_COLUMNS], F.lit("inbox").alias("origin"),
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
    step) and the segments behind them can be dropped (``engine.maintain.job``)."""
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
        *CANDIDATE_COLUMNS, F.lit("ledger").alias("origin"),
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
        *CANDIDATE_COLUMNS, F.lit("m").alias("row_type"),
        *[F.lit(None).cast(LEDGER_TYPES[c]).alias(c) for c in P_ROW_COLUMNS],
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
