"""Bulk receives by range lock (decision 018): one ledger row per partition, not per message.

A DataFrame receive of many fresh messages (still in the inbox after their partition's
cursor) claims a window per partition, as a forwarding step does (``engine.forward.window``),
in the main lane: the ``w`` row is a **range lock** on the window's messages under one lock
token, delivered once, locked until the receive's lock stamp. The messages are read from
the inbox when the caller reads the DataFrame (rows are immutable).

- A complete of exactly a whole range, within its lock, deletes its ``w`` row: one driver
  commit, however many messages it holds.
- Any other settlement touching a range (part of it, abandon, defer, dead-letter, renew,
  a lock already run out) first **materializes** the range: its ``w`` row becomes one
  message row per message, locked as the range was (what a receive writes today), in one
  commit; then the settlement runs as for any locked message.
- A range whose lock ran out is materialized by the next receive of its partitions (its
  messages then are returned messages, delivered again with a higher delivery count).

Readers show a range's messages as locked Active messages (``engine.reads.view``) and
maintenance keeps their segments (``engine.maintain.job``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial, reduce
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sbqueue.core.sequence import partition_of
from sbqueue.core.tokens import range_token
from sbqueue.core.transitions import ACTIVE, Lane, ReceiveContext
from sbqueue.engine.columns import partition_column
from sbqueue.engine.forward import window as forward_window
from sbqueue.engine.forward import window_rows
from sbqueue.engine.forward.window import ForwardWindow
from sbqueue.engine.receive.attempt import OUTPUT_COLUMNS, as_aware
from sbqueue.engine.schema import LEDGER_COLUMNS, LEDGER_TYPES, WINDOW, ledger_row
from sbqueue.engine.settle.apply import SettleResult
from sbqueue.store.guarded import EXPECT_COLUMN, OP_COLUMN, retry_conflicts
from sbqueue.store.thresholds import MIN_RANGE

if TYPE_CHECKING:
    from sbqueue.engine.handle import EntityHandle
    from sbqueue.engine.ledger import Ledger

__all__ = ["MIN_RANGE", "Span", "frame_spans", "materialize_lapsed", "ranges_in",
           "receive_ranges", "settle_ranges", "spans_of", "stated_spans"]

_W_COLUMNS = [c for c in LEDGER_COLUMNS if c != "session_state"]


def receive_ranges(entity: EntityHandle, max_messages: int, ctx: ReceiveContext,
                   partitions: list[int]) -> DataFrame | None:
    """Range-lock up to ``max_messages`` fresh messages of ``partitions``; their DataFrame
    (``OUTPUT_COLUMNS``), or None where the receive path must decide (nothing committed,
    or only what that path would have committed itself: idle cursor moves).

    A claim that read only part of the head (``forward.window``'s reach, or a bounded run
    of commits) and took fewer than asked is followed by another, under the same token: a
    partition's windows then hold consecutive numbers, settled whole as one range."""
    token, left = range_token(), max_messages
    claims: list[forward_window.Claim] = []
    while left > 0 and len(claims) < _CLAIMS:
        got = retry_conflicts(partial(forward_window.claim, entity, token, left, ctx,
                                      partitions, Lane.MAIN),
                              what=f"range receive at {entity.path}")
        if got is None or not got.windows:
            if claims:
                break
            if got is not None and not got.for_receive and got.read_all:
                return entity.none()  # nothing deliverable now (a young transaction waits)
            return None
        claims.append(got)
        left -= sum(w.count for w in got.windows)
        if got.read_all:
            break
    windows = [w for c in claims for w in c.windows]
    numbered = [c.numbered for c in claims]
    frame = ranged_frame(entity, windows, None if any(n is None for n in numbered)
                         else pa.concat_tables(numbered))
    _STATED[frame] = _spans_of_windows(windows)
    return frame


# What each range receive's own DataFrame holds, known without reading it: the frame is
# defined by its windows (inbox rows never change), so its settlement needs no Spark job
# to find out (``stated_spans``). Weak keys: a frame dropped by its caller is forgotten.
_STATED: weakref.WeakKeyDictionary[DataFrame, dict[Key, Span]] = weakref.WeakKeyDictionary()


def stated_spans(batch: DataFrame) -> dict[Key, Span] | None:
    """``frame_spans`` of ``batch`` where it is a range receive's own DataFrame object (as
    it was returned: not filtered, not checkpointed), without a Spark job; else None."""
    return _STATED.get(batch)


def _spans_of_windows(windows: list[ForwardWindow]) -> dict[Key, Span]:
    """What ``frame_spans`` finds in the rows of ``windows``: per (partition, token) their
    count, lowest and highest number."""
    return {k: Span(sum(w.count for w in held), min(w.sequence_numbers[0] for w in held),
                    max(w.sequence_numbers[-1] for w in held))
            for k, held in _keyed(windows).items()}


def _keyed(windows: Iterable[ForwardWindow]) -> dict[Key, list[ForwardWindow]]:
    """``windows`` by (partition, lock token): one receive's ranges of a partition."""
    keyed: dict[Key, list[ForwardWindow]] = {}
    for w in windows:
        keyed.setdefault((w.partition, w.token), []).append(w)
    return keyed


_CLAIMS = 3  # claims one receive makes at most (each one commit)


def ranged_frame(entity: EntityHandle, windows: list[ForwardWindow],
                 numbered: pa.Table | None = None) -> DataFrame:
    """The ranges' messages as a receive hands them out: locked, delivered once."""
    if numbered is not None and numbered.num_rows == sum(w.count for w in windows):
        rows = window_rows.numbered_rows(entity, windows, numbered)
    else:
        rows = window_rows.window_rows(entity, windows)
    until = {w.partition: w.lease_until for w in windows}
    locked_until = F.expr("CASE partition_id " + " ".join(
        f"WHEN {p} THEN timestamp_micros({_micros(t)}L)" for p, t in until.items()) + " END")
    state = {"state": F.lit(ACTIVE), "delivery_count": F.lit(1),
             "lock_token": F.lit(windows[0].token), "locked_until_utc": locked_until,
             "dead_letter_reason": F.lit(None), "dead_letter_error_description": F.lit(None),
             "dead_letter_source": F.lit(None)}
    return rows.select(*[state[c].cast(LEDGER_TYPES[c]).alias(c) if c in state else F.col(c)
                         for c in OUTPUT_COLUMNS])


def _micros(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def _ranges(ledger: Ledger, partitions: Iterable[int], keep: Any) -> list[ForwardWindow]:
    """The range locks of ``partitions`` that ``keep`` keeps: read on the driver where it
    can be, else with Spark (a main lane too large to scan here is not one without
    ranges)."""
    parts = sorted(set(partitions))
    if not parts:
        return []
    found = ledger.scan_here({"partition_id": parts, "lane": [Lane.MAIN]}, _W_COLUMNS,
                             lambda r: r["row_type"] == WINDOW and keep(r))
    if found is None:
        found = [r for r in (as_aware(row) for row in ledger.rows(
            F.col("partition_id").isin(parts) & (F.col("lane") == Lane.MAIN)
            & (F.col("row_type") == WINDOW)).select(*_W_COLUMNS).collect()) if keep(r)]
    return [ForwardWindow.of_row(r) for r in found]


@dataclass(frozen=True)
class Span:
    """What a settlement asks of one (partition, lock token): how many distinct sequence
    numbers, the lowest and the highest. A range's numbers are consecutive, so a span of
    its size between its ends names each of them (and nothing else)."""

    distinct: int
    low: int
    high: int

    def covers(self, windows: list[ForwardWindow]) -> bool:
        """Whether the span names every number of ``windows`` (one key's ranges) and no
        other: they must hold consecutive numbers together (no other's window between)."""
        runs = sorted((w.sequence_numbers[0], w.sequence_numbers[-1]) for w in windows)
        joined = all(b[0] == a[1] + 1 for a, b in pairwise(runs))
        return bool(runs) and joined and (self.distinct, self.low, self.high) == (
            runs[-1][1] - runs[0][0] + 1, runs[0][0], runs[-1][1])


Key = tuple[int, str]  # (partition, lock token)


def spans_of(locks: Iterable[tuple[int, str]]) -> dict[Key, Span]:
    asked: dict[Key, set[int]] = {}
    for seq, token in locks:
        asked.setdefault((partition_of(seq), token), set()).add(seq)
    return {k: Span(len(s), min(s), max(s)) for k, s in asked.items()}


def frame_spans(batch: DataFrame) -> dict[Key, Span]:
    """``spans_of`` a DataFrame's (sequence_number, lock_token) pairs: one Spark job, a few
    rows back (a bulk settlement need not bring every pair to the driver)."""
    part = partition_column(F.col("sequence_number")).alias("p")
    found = batch.groupBy(part, "lock_token").agg(
        F.count_distinct("sequence_number").alias("n"), F.min("sequence_number").alias("lo"),
        F.max("sequence_number").alias("hi")).where(F.col("lock_token").isNotNull()).collect()
    return {(int(r["p"]), str(r["lock_token"])): Span(int(r["n"]), int(r["lo"]), int(r["hi"]))
            for r in found}


def ranges_in(keys: Iterable[Key]) -> Column:
    """Whether a row's (partition, lock token) is one of ``keys`` (rows of settled ranges)."""
    part = partition_column(F.col("sequence_number"))
    return reduce(lambda a, b: a | b, [(part == p) & (F.col("lock_token") == t)
                                      for p, t in keys], F.lit(False))


def settle_ranges(entity: EntityHandle, asked: dict[Key, Span], kind: str, now: datetime
                  ) -> tuple[SettleResult, set[Key]]:
    """Settle what ranges can settle whole (a complete of a whole range within its lock:
    its ``w`` row deleted) and materialize every other range ``asked`` touches, in one
    commit; the settled result and the (partition, token) keys it settled."""
    tokens = {token for _, token in asked}
    ranges = [w for w in _ranges(entity.ledger, (p for p, _ in asked),
                                 lambda r: r["lock_token"] in tokens)
              if (w.partition, w.token) in asked]
    if not ranges:
        return SettleResult(), set()
    whole = [w for key, held in _keyed(ranges).items() if kind == "complete"
             and all(w.lease_until > now for w in held) and asked[key].covers(held)
             for w in held]
    rest = [w for w in ranges if w not in whole]
    changes = [w.row(**{EXPECT_COLUMN: w.row_version, OP_COLUMN: "delete"}) for w in whole]
    changes += _materialized(entity, rest)
    entity.ledger.merge_rows(changes, sorted({w.partition for w in ranges}), [Lane.MAIN])
    return (SettleResult(settled=sum(w.count for w in whole)),
            {(w.partition, w.token) for w in whole})


def materialize_lapsed(entity: EntityHandle, partitions: list[int], now: datetime) -> None:
    """Turn the ranges of ``partitions`` whose lock ran out into message rows (one commit),
    so that a receive finds their messages returned (S5.3). On either executor: a range
    locked by a process on the other one is returned here too."""

    def attempt() -> None:  # read again on each try: another may have done it meanwhile
        lapsed = _ranges(entity.ledger, partitions, lambda r: r["locked_until_utc"] <= now)
        if lapsed:
            entity.ledger.merge_rows(_materialized(entity, lapsed),
                                     sorted({w.partition for w in lapsed}), [Lane.MAIN])
    retry_conflicts(attempt, what=f"lapsed range locks at {entity.path}")


def _materialized(entity: EntityHandle, ranges: list[ForwardWindow]) -> list[dict[str, Any]]:
    """The changes turning ``ranges`` into one locked message row each (as a receive of
    those messages writes them), and deleting their ``w`` rows."""
    if not ranges:
        return []
    messages = window_rows.window_messages(entity, ranges)
    if messages is None:
        messages = [as_aware(r) for r in window_rows.window_rows(entity, ranges).select(
            *[c for c in LEDGER_COLUMNS if c in _MESSAGE_LOCATOR]).collect()]
    changes = [w.row(**{EXPECT_COLUMN: w.row_version, OP_COLUMN: "delete"}) for w in ranges]
    for m in messages:
        w = _owner(ranges, m)
        changes.append(ledger_row(
            **{c: m.get(c) for c in _MESSAGE_LOCATOR}, lane=Lane.MAIN, row_type="m",
            row_version=1, state=ACTIVE, delivery_count=w.delivery_count,
            lock_token=w.token, locked_until_utc=w.lease_until,
            **{EXPECT_COLUMN: None, OP_COLUMN: "upsert"}))
    return changes


_MESSAGE_LOCATOR = ("partition_id", "sequence_number", "segment", "send_id", "batch_index",
                    "message_id", "session_id", "enqueued_time_utc",
                    "scheduled_enqueue_time_utc", "expires_at_utc", "size_in_bytes")


def _owner(ranges: list[ForwardWindow], message: dict[str, Any]) -> ForwardWindow:
    seq = int(message["sequence_number"])
    return next(w for w in ranges if seq in w.sequence_numbers)
