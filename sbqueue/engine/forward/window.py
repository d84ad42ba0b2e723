"""Forwarding the inbox head by window (decision 017): no ledger row per message.

A message still in the inbox after its partition's cursor needs no ledger row to be
forwarded. A step takes a **window** of such rows in each partition, the longest prefix of
the head a receive would hand out as it stands (``core.forwarding.window_forwardable``):

1. **claim** - one commit on the driver: each cursor moves to the end of its window, and one
   ``w`` row per window (lane ``transfer``) names it: where it starts (the cursor it moved
   from), where it ends, the step's token and lease. No Spark job; it reads the head narrow,
   with Arrow, and decides with the same rule compiled to Arrow (``to_arrow``);
2. **write** - the window's rows, read once with their bodies (the change feed of those
   commits only), numbered as the cursor numbered them, appended to the destination with
   Delta's idempotent write (``txnAppId`` = the token): one Spark job, whatever is repeated;
3. **release** - one commit on the driver deleting the ``w`` rows.

A step killed after 1 leaves the ``w`` rows; the next step finds them once the lease ran out
and repeats 2 (a no-op if it committed) and 3. While a window is claimed its messages are in
the ``Transfer`` sub-queue of the view (``engine.reads.view``) and maintenance keeps its inbox
segments (``engine.maintain.job``). Everything else (rows a window stops at: scheduled, expired,
a 5th hop, a transaction; returned messages in the ledger; sessions; duplicate detection;
tables not in a local folder) goes the receive path of ``engine.forward.job``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sbqueue.core.expr import Expr
from sbqueue.core.forwarding import window_forwardable
from sbqueue.core.sequence import counter_of, sequence_of
from sbqueue.core.transitions import (
    ACTIVE,
    RECORD_AT,
    Lane,
    ReceiveContext,
    deliverable,
)
from sbqueue.engine.columns import arrow_values
from sbqueue.engine.inbox import FileRange
from sbqueue.engine.receive.attempt import (
    MAX_INDEX,
    PENDING,
    WINDOW_VERSIONS,
    Cursor,
    with_unstored,
)
from sbqueue.engine.receive.small import cursor_row
from sbqueue.engine.schema import (
    COPY_BITS,
    TRANSACTION_SEND_PREFIX,
    WINDOW,
    ledger_row,
    owns,
)
from sbqueue.store.guarded import EXPECT_COLUMN, OP_COLUMN
from sbqueue.store.thresholds import READ_CAP

if TYPE_CHECKING:
    from sbqueue.engine.handle import EntityHandle

__all__ = ["NUMBERED", "Claim", "ForwardWindow", "after_heads", "claim"]

_HEAD_COLUMNS = ["partition_id", "send_id", "batch_index", "targets", "enqueued_time_utc",
                 "scheduled_enqueue_time_utc", "expires_at_utc", "hop_count"]
_MARK_COLUMNS = ["row_type", "partition_id", "cursor_version", "cursor_index",
                 "last_counter", "row_version", "send_id", "lane", "state",
                 "locked_until_utc", "scheduled_enqueue_time_utc", "expires_at_utc",
                 "delivery_count", "lock_token"]


@dataclass(frozen=True)
class ForwardWindow:
    """One partition's claimed window: the inbox rows after ``start`` up to and including
    (``end_version``, ``end_index``), numbered ``start.counter + 1 .. last_counter``."""

    partition: int
    start: Cursor
    end_version: int
    end_index: int
    last_counter: int
    token: str
    lease_until: datetime
    claimed_at: datetime
    row_version: int = 1
    lane: str = Lane.TRANSFER  # main: a receive's range lock (its messages delivered once)

    @property
    def count(self) -> int:
        return self.last_counter - self.start.counter

    @property
    def delivery_count(self) -> int:
        """A range lock's messages were delivered once; a forwarding window's never."""
        return 1 if self.lane == Lane.MAIN else 0

    @property
    def sequence_numbers(self) -> range:
        return range(sequence_of(self.partition, self.start.counter + 1),
                     sequence_of(self.partition, self.last_counter) + 1)

    def row(self, **change: Any) -> dict[str, Any]:
        """Its ``w`` row: keyed by the last message's sequence number; the start in the
        cursor columns (maintenance reads it as a cursor), the end in (segment,
        batch_index), the token and lease as a lock's."""
        return ledger_row(
            partition_id=self.partition, lane=self.lane, row_type=WINDOW,
            delivery_count=self.delivery_count,
            sequence_number=sequence_of(self.partition, self.last_counter),
            row_version=self.row_version, cursor_version=self.start.version,
            cursor_index=self.start.position, last_counter=self.start.counter,
            segment=self.end_version, batch_index=self.end_index, lock_token=self.token,
            locked_until_utc=self.lease_until, enqueued_time_utc=self.claimed_at, **change)

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> ForwardWindow:
        partition = int(row["partition_id"])
        return cls(partition, Cursor(partition, int(row["cursor_version"]),
                                     int(row["cursor_index"]), int(row["last_counter"]), 0),
                   int(row["segment"]), int(row["batch_index"]),
                   counter_of(int(row["sequence_number"])), str(row["lock_token"]),
                   row["locked_until_utc"], row["enqueued_time_utc"], int(row["row_version"]),
                   str(row["lane"]))


@dataclass(frozen=True)
class Claim:
    """What a claim did: the windows it committed, and how many messages the receive
    path should take before the next window (returned ledger messages, or a head row no
    window may take); ``None`` windows: it could not decide here (nothing committed)."""

    windows: list[ForwardWindow]
    for_receive: int
    read_all: bool = False  # the head was read up to the inbox's latest version
    numbered: pa.Table | None = None  # the windows' rows: ``NUMBERED`` columns


def claim(source: EntityHandle, token: str, limit: int, ctx: ReceiveContext,
          partitions: list[int], lane: str = Lane.TRANSFER) -> Claim | None:
    """Claim windows of at most ``limit`` messages over ``partitions`` in one driver
    commit; None where this cannot be decided on the driver (the receive path claims).
    ``lane``: transfer for a forwarding step (leased until ``ctx.locked_until``), main for
    a receive's range lock (locked until then)."""
    ledger = source.ledger
    if not ledger.commits_here() or source.dedupe is not None or source.props.requires_session:
        return None
    while True:
        marks = ledger.scan_here(
            {"partition_id": partitions, "lane": [Lane.MAIN, Lane.SCHEDULED]}, _MARK_COLUMNS,
            lambda r: r["row_type"] != "m" or _returned(r, ctx))
        if marks is None:
            return None
        returned = sum(1 for r in marks if r["row_type"] == "m" or (
            r["row_type"] == WINDOW and r["locked_until_utc"] <= ctx.now))
        if returned:
            return Claim([], min(returned, limit))
        got = _claim_head(source, token, limit, ctx, partitions, marks, lane)
        if got is None or got.windows or not got.moved:
            return None if got is None else Claim(got.windows, got.for_receive, got.read_all,
                                                  got.numbered)
        # only idle cursors moved (a read window of commits held none of their rows): the
        # next read starts after them


@dataclass(frozen=True)
class _Head:
    windows: list[ForwardWindow]
    for_receive: int
    moved: bool
    read_all: bool
    numbered: pa.Table | None = None


def _claim_head(source: EntityHandle, token: str, limit: int, ctx: ReceiveContext,
                partitions: list[int], marks: list[dict[str, Any]], lane: str
                ) -> _Head | None:
    """Decide and commit windows over the head read after the cursors in ``marks``; a
    cursor with none of its rows among the commits read moves past them (as a receive's
    ``_cursor_moves``), so that an idle partition does not hold the next read back."""
    cursors = with_unstored(
        [Cursor(int(r["partition_id"]), int(r["cursor_version"]), int(r["cursor_index"]),
                int(r["last_counter"]), int(r["row_version"]))
         for r in marks if r["row_type"] == "p"], partitions)
    committed = {str(r["send_id"]) for r in marks if r["row_type"] == "t"}
    start, latest = min(c.version for c in cursors), source.inbox.version()
    end = min(latest, start + WINDOW_VERSIONS)
    if end <= start - 1:
        return _Head([], 0, False, True)
    rule = window_forwardable(ctx) if lane == Lane.TRANSFER else deliverable(ctx)
    how = (ctx, limit, token, rule, lane)
    decided: _Decided | None = None
    reaches = _reaches(limit, source.target, {c.partition: c.position for c in cursors},
                       source.inbox.commit_ranges(end) if source.target is None else None
                       ) if start == end else [None]
    for reach in reaches:
        decided = _decide(source, cursors, committed, (start, end), reach, how)
        if decided is None or decided[1]:
            break  # not readable here, or windows taken: the last reach read stands
    if decided is None:
        return None
    head, windows, stopped, numbered = decided
    busy = set(head.column("partition_id").to_pylist())
    idle = [c for c in cursors if end < latest and c.partition not in busy
            and (c.version, c.position) < (end, MAX_INDEX)]
    moves = [cursor_row(w.partition, w.end_version, w.end_index, w.last_counter,
                        w.start.p_version) for w in windows]
    moves += [cursor_row(c.partition, end, MAX_INDEX, c.counter, c.p_version) for c in idle]
    adds = [w.row(**{EXPECT_COLUMN: None, OP_COLUMN: "upsert"}) for w in windows]
    if moves:
        ledger_lanes = sorted({Lane.MAIN, lane})
        source.ledger.merge_rows(moves + adds, sorted({int(m["partition_id"]) for m in moves}),
                                 ledger_lanes)
    return _Head(windows, limit if stopped and not windows else 0, bool(moves),
                 end == latest and reach is None, numbered)


def _reaches(limit: int, target: str | None, positions: dict[int, int],
             ranges: dict[int, list[FileRange]] | None = None) -> list[Reach | None]:
    """How far a claim reading one commit reads each partition past its cursor, tried in
    turn until one yields a window: where the commit's files are known (``ranges``), to the
    point where its share of twice what it may take is reached (shared by the partitions
    with rows of the commit left after their cursors, ``positions``; a window may then
    run on into the next Spark task's rows); twice what it may take, in batch indexes;
    that, in the next Spark task's block of batch indexes (``monotonically_increasing_id``
    starts each task at ``task << 33``); then all of it (None). A drain of one large send
    reads about what a round takes, not all that is left, so its cost does not grow with
    the backlog. A topic's copies of one message take ``1 << COPY_BITS`` indexes."""
    shift = COPY_BITS if target is not None else 0
    left = 0 if ranges is None else sum(
        1 for p, at in positions.items() if any(high > at for _, high, _ in ranges.get(p, [])))
    by_files: list[Reach | None] = [] if ranges is None else [
        FileReach(ranges, -(-2 * limit // max(left, 1)))]
    return [*by_files, IndexReach(2 * limit << shift, 0),
            IndexReach(2 * limit << shift, _TASK_BITS + shift), None]


_TASK_BITS = 33  # a send's batch indexes: the Spark task in the bits above (engine.send.frame)


@dataclass(frozen=True)
class IndexReach:
    """A bound on a partition's head read: ``width`` indexes past its cursor, or, with
    ``block`` bits, past the start of the block after the cursor's."""

    width: int
    block: int

    def bound(self, partition: int, position: int) -> int:
        if not self.block:
            return position + self.width
        return ((max(position, 0) >> self.block) + 1 << self.block) + self.width


@dataclass(frozen=True)
class FileReach:
    """A bound on a partition's head read from the files its commit added: where
    ``rows`` of the partition's rows after the cursor are reached, counting whole files,
    except in a file of consecutive batch indexes (a send grouped by partition,
    ``engine.send.frame``), where the bound stops at the row that reaches them. Any bound reads
    a prefix of the partition's rows (the filter takes every row up to it); this one
    reads about ``rows`` of them, on across Spark tasks' blocks of batch indexes."""

    ranges: dict[int, list[FileRange]]
    rows: int

    def bound(self, partition: int, position: int) -> int:
        taken, bound = 0, position
        for low, high, count in self.ranges.get(partition, []):
            if high <= position:
                continue
            if high - low + 1 == count:  # consecutive: the rows after the cursor are known
                start = max(low, position + 1)
                last = min(high, start + (self.rows - taken) - 1)
                taken, bound = taken + last - start + 1, max(bound, last)
            else:
                taken, bound = taken + count, max(bound, high)
            if taken >= self.rows:
                break
        return bound


Reach = IndexReach | FileReach


_Decided = tuple[pa.Table, list["ForwardWindow"], bool, pa.Table]


def _decide(source: EntityHandle, cursors: list[Cursor], committed: set[str],
            versions: tuple[int, int], reach: Reach | None, how: tuple[Any, ...]
            ) -> _Decided | None:
    """The head read after ``cursors`` (each partition up to ``reach`` past its
    cursor, where given: a prefix of its rows) and the windows decided over it; None:
    not readable here."""
    ctx, limit, token, rule, lane = how
    start, end = versions
    head = source.inbox.appended_table_here(start - 1, end, _HEAD_COLUMNS, READ_CAP,
                                            _head_filter(cursors, end, reach))
    if head is None:
        return None
    head = after_heads(head, cursors, source.target)
    windows, stopped, numbered = _windows(head, cursors, committed, ctx, limit, token, rule,
                                          lane)
    return head, windows, stopped, numbered


def _head_filter(cursors: list[Cursor], end: int, reach: Reach | None = None) -> str:
    """The head rows a claim reading up to version ``end`` may take, as a filter that
    prunes files: a cursor in that last version skips the rows before it (a drain of one
    large send reads what is left of it, not all of it) and, given ``reach``, the rows
    past its bound."""
    def one(c: Cursor) -> str:
        mine = f"partition_id = {c.partition}"
        if c.version != end:
            return mine
        upto = "" if reach is None else (
            f" AND batch_index <= {reach.bound(c.partition, c.position)}")
        return f"({mine} AND batch_index > {c.position}{upto})"
    return " OR ".join(one(c) for c in cursors)


def _returned(row: dict[str, Any], ctx: ReceiveContext) -> bool:
    """A message row a receive could hand out now: returned, or a schedule now due."""
    return deliverable(ctx).evaluate({**row, RECORD_AT: None}) is True


def after_heads(head: pa.Table, cursors: list[Cursor], target: str | None,
           ends: list[Cursor] | None = None) -> pa.Table:
    """The head rows of the cursors' partitions this entity owns, after each cursor (and
    up to each of ``ends``), in commit order."""
    known = pc.is_in(head.column("partition_id"), pa.array(sorted(
        {c.partition for c in cursors}), pa.int32()))
    head = head.filter(known)
    keep = _past(head, cursors)
    if ends is not None:
        keep = pc.and_(keep, pc.invert(_past(head, ends)))
    if target is None:
        owned = pc.is_null(head.column("targets"))
    else:
        owned = pa.array([owns(target, t) for t in head.column("targets").to_pylist()],
                         pa.bool_())
    return head.filter(pc.and_(keep, owned)).sort_by(
        [("_commit_version", "ascending"), ("batch_index", "ascending")])


def _past(head: pa.Table, cursors: list[Cursor]) -> pa.ChunkedArray:
    """Whether each row (of the cursors' partitions) comes after its partition's cursor
    (``engine.receive.attempt.is_after``, vectorized)."""
    places = {c.partition: c for c in cursors}
    size = max(places) + 1
    versions = pa.array([places[p].version if p in places else 1 << 62 for p in range(size)])
    indexes = pa.array([places[p].position if p in places else 0 for p in range(size)])
    part = head.column("partition_id")
    cv, ci = pc.take(versions, part), pc.take(indexes, part)
    v, i = head.column("_commit_version"), head.column("batch_index")
    return pc.or_(pc.greater(v, cv), pc.and_(pc.equal(v, cv), pc.greater(i, ci)))


def _windows(head: pa.Table, cursors: list[Cursor], committed: set[str],
             ctx: ReceiveContext, limit: int, token: str, rule: Expr, lane: str
             ) -> tuple[list[ForwardWindow], bool, pa.Table]:
    """Each partition's window (its head up to the first row a window may not take, at
    most ``limit`` rows in all, earliest commits first), whether a window stopped at a
    row the receive path must decide (not one of a transaction still committing), and the
    windows' rows numbered (``NUMBERED``). Vectorized: a head holds up to ``READ_CAP`` rows."""
    n = head.num_rows
    if n == 0:
        return [], False, _numbered([], [], [], [])
    fresh = head.append_column("state", pa.array([ACTIVE] * n, pa.string())).append_column(
        "delivery_count", pa.array([0] * n, pa.int32())).append_column(
        "locked_until_utc", pa.nulls(n, pa.timestamp("us", tz="UTC"))).append_column(
        RECORD_AT, pa.nulls(n, pa.timestamp("us", tz="UTC")))
    ok = arrow_values(fresh, rule).fill_null(False).to_numpy(zero_copy_only=False)
    sends = head.column("send_id")
    pending = pc.and_(pc.starts_with(sends, TRANSACTION_SEND_PREFIX), pc.invert(
        pc.is_in(sends, pa.array(sorted(committed), pa.string())))).to_numpy(
        zero_copy_only=False)  # still committing: it may yet be a message; else void
    parts = head.column("partition_id").to_numpy()
    taken, first_block = _prefixes(parts, pending | ~ok, limit)
    by_partition = {c.partition: c for c in cursors}
    versions = head.column("_commit_version").to_numpy()
    indexes = head.column("batch_index").to_numpy()
    windows, numbers = [], []
    for p in sorted(set(parts[taken].tolist())):
        mine = taken[parts[taken] == p]
        last, first = int(mine[-1]), by_partition[p].counter + 1
        windows.append(ForwardWindow(
            p, by_partition[p], int(versions[last]), int(indexes[last]),
            first - 1 + len(mine), token, ctx.locked_until, ctx.now, 1, lane))
        numbers.append((mine, sequence_of(p, first) + np.arange(len(mine), dtype=np.int64)))
    old = (head.column("enqueued_time_utc").to_numpy(zero_copy_only=False)
           <= np.datetime64((ctx.now - PENDING).replace(tzinfo=None), "us"))
    stopped = any(not pending[b] or old[b] for b in first_block)
    rows = np.concatenate([m for m, _ in numbers]) if numbers else np.array([], np.int64)
    return windows, stopped, _numbered(
        parts[rows], versions[rows], indexes[rows],
        np.concatenate([s for _, s in numbers]) if numbers else np.array([], np.int64))


NUMBERED = ("partition_id", "_commit_version", "batch_index", "sequence_number")


def _numbered(*columns: Any) -> pa.Table:
    """Window rows' places and the sequence numbers their windows gave them."""
    types = (pa.int32(), pa.int64(), pa.int64(), pa.int64())
    return pa.table([pa.array(c, t) for c, t in zip(columns, types, strict=True)],
                    names=list(NUMBERED))


def _prefixes(parts: np.ndarray, block: np.ndarray, limit: int
              ) -> tuple[np.ndarray, list[int]]:
    """Over rows in commit order: the first ``limit`` rows that precede their partition's
    first blocked row (taken), and the first blocked row of each partition the limit did
    not close first (a partition is closed by the limit at its first row not taken)."""
    order = np.argsort(parts, kind="stable")
    sorted_parts, sorted_block = parts[order], block[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_parts)) + 1]
    counts = np.cumsum(sorted_block)
    before = np.repeat(np.r_[0, counts[starts[1:] - 1]], np.diff(np.r_[starts, len(parts)]))
    open_sorted = (counts - before) == 0
    eligible = np.empty_like(open_sorted)
    eligible[order] = open_sorted
    candidates = np.flatnonzero(eligible)
    taken = candidates[:limit]
    cut = set(parts[candidates[limit:]].tolist())
    first_block = []
    for p in set(parts[block].tolist()) - cut:
        first_block.append(int(np.flatnonzero(block & (parts == p))[0]))
    return taken, first_block


