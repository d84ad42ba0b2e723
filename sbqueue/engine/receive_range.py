"""Bulk receives by range lock (decision 018): one ledger row per partition, not per message.

A DataFrame receive of many fresh messages (still in the inbox after their partition's
cursor) claims a window per partition, as a forwarding step does (``engine.forward_window``),
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

Readers show a range's messages as locked Active messages (``engine.reads``) and
maintenance keeps their segments (``engine.maintain``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sbqueue.core.sequence import partition_of
from sbqueue.core.transitions import ACTIVE, Lane, ReceiveContext
from sbqueue.engine import forward_window
from sbqueue.engine.forward_window import ForwardWindow
from sbqueue.engine.receive import OUTPUT_COLUMNS
from sbqueue.engine.schema import LEDGER_COLUMNS, LEDGER_TYPES, WINDOW, ledger_row
from sbqueue.engine.settle import SettleResult
from sbqueue.store.delta import EXPECT_COLUMN, OP_COLUMN, retry_conflicts

if TYPE_CHECKING:
    from sbqueue.engine.entity import Entity
    from sbqueue.engine.ledger import Ledger

__all__ = ["MIN_RANGE", "materialize_lapsed", "receive_ranges", "settle_ranges"]

MIN_RANGE = 1_000  # a receive asking fewer messages locks them one by one (as before)
_W_COLUMNS = [c for c in LEDGER_COLUMNS if c != "session_state"]


def receive_ranges(entity: Entity, max_messages: int, ctx: ReceiveContext,
                   partitions: list[int]) -> DataFrame | None:
    """Range-lock up to ``max_messages`` fresh messages of ``partitions``; their DataFrame
    (``OUTPUT_COLUMNS``), or None where the receive path must decide (nothing committed,
    or only what that path would have committed itself: idle cursor moves)."""
    token = str(uuid.uuid4())
    got = retry_conflicts(
        lambda: forward_window.claim(entity, token, max_messages, ctx, partitions, Lane.MAIN),
        what=f"range receive at {entity.path}")
    if got is None or not got.windows:
        return None
    return ranged_frame(entity, got.windows)


def ranged_frame(entity: Entity, windows: list[ForwardWindow]) -> DataFrame:
    """The ranges' messages as a receive hands them out: locked, delivered once."""
    rows = forward_window.window_rows(entity, windows)
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


def _ranges(ledger: Ledger, partitions: Iterable[int], keep: Any) -> list[ForwardWindow] | None:
    found = ledger.scan_here({"partition_id": sorted(set(partitions)), "lane": [Lane.MAIN]},
                             _W_COLUMNS, lambda r: r["row_type"] == WINDOW and keep(r))
    return None if found is None else [ForwardWindow.of_row(r) for r in found]


def settle_ranges(entity: Entity, locks: list[tuple[int, str]], kind: str, now: datetime
                  ) -> tuple[SettleResult, list[tuple[int, str]]]:
    """Settle what ranges can settle whole (a complete of a whole range within its lock:
    its ``w`` row deleted) and materialize every other range ``locks`` touch, in one
    commit; the settled result and the locks left for the per-message settlement."""
    tokens = {token for _, token in locks}
    ranges = _ranges(entity.ledger, (partition_of(seq) for seq, _ in locks),
                     lambda r: r["lock_token"] in tokens)
    if not ranges:
        return SettleResult(), locks
    asked: dict[tuple[int, str], set[int]] = {}
    for seq, token in locks:
        asked.setdefault((partition_of(seq), token), set()).add(seq)
    whole = [w for w in ranges if kind == "complete" and w.lease_until > now
             and asked.get((w.partition, w.token)) == set(w.sequence_numbers)]
    rest = [w for w in ranges if w not in whole]
    changes = [w.row(**{EXPECT_COLUMN: w.row_version, OP_COLUMN: "delete"}) for w in whole]
    changes += _materialized(entity, rest)
    entity.ledger.merge_rows(changes, sorted({w.partition for w in ranges}), [Lane.MAIN])
    done = {(w.partition, w.token) for w in whole}
    left = [(seq, token) for seq, token in locks if (partition_of(seq), token) not in done]
    return SettleResult(settled=sum(w.count for w in whole)), left


def materialize_lapsed(entity: Entity, partitions: list[int], now: datetime) -> None:
    """Turn the ranges of ``partitions`` whose lock ran out into message rows (one commit),
    so that a receive finds their messages returned (S5.3)."""
    if not entity.ledger.commits_here():
        return
    lapsed = _ranges(entity.ledger, partitions, lambda r: r["locked_until_utc"] <= now)
    if lapsed:
        retry_conflicts(lambda: entity.ledger.merge_rows(
            _materialized(entity, lapsed), sorted({w.partition for w in lapsed}), [Lane.MAIN]),
            what=f"lapsed range locks at {entity.path}")


def _materialized(entity: Entity, ranges: list[ForwardWindow]) -> list[dict[str, Any]]:
    """The changes turning ``ranges`` into one locked message row each (as a receive of
    those messages writes them), and deleting their ``w`` rows."""
    if not ranges:
        return []
    messages = forward_window.window_messages(entity, ranges)
    if messages is None:
        messages = [r.asDict() for r in forward_window.window_rows(entity, ranges).select(
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
