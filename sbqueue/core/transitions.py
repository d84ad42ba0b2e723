"""Every state change of a message, as pure functions of the row as read (SPEC S5-S8).

Each function returns an ``Outcome``: the new value of every column it may change, plus
``_op`` ('upsert', 'delete' or NULL for "no change") and, for receives, ``_handed`` (the
row is returned to the caller). The engine applies an outcome to a DataFrame as a single
projection (``sbqueue.engine.columns``); tests evaluate the same expressions on plain dicts.
Nothing here depends on column order, hash seeds or the order rules are listed in.

Row columns read (the ledger's, plus the candidate's ``origin`` 'inbox' or 'ledger'):
``lane state delivery_count lock_token locked_until_utc expires_at_utc
scheduled_enqueue_time_utc row_version dead_letter_reason dead_letter_error_description``;
receive adds ``_picked`` (ranked into the caller's share), ``_passed`` (an inbox row the
partition cursor moves past), ``_void`` (an inbox row of a transaction that never committed:
passed, never stored, S12.2) and ``_new_token`` (a fresh uuid drawn before the projection,
so the projection itself is deterministic); settle adds ``_token`` (the caller's token).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from sbqueue.core.expr import Expr, Row, Template, col, lit, when

__all__ = [
    "DELIVERABLE",
    "LANES",
    "RECORD_AT",
    "Lane",
    "Outcome",
    "ReceiveContext",
    "SettleContext",
    "cancel_outcome",
    "cancel_valid",
    "completed_by_record",
    "deferred_expired",
    "deferred_outcome",
    "deferred_valid",
    "delete_outcome",
    "delete_valid",
    "deliverable",
    "expiry_outcome",
    "receive_outcome",
    "receive_rules",
    "settle_outcome",
    "settle_valid",
]


class Lane:
    """Ledger partitions within a message partition: a receive reads only its own."""

    MAIN = "main"  # partition cursor, locked and returned messages of the queue
    SCHEDULED = "scheduled"  # passed by the cursor before their scheduled time
    DEFERRED = "deferred"
    DEAD_LETTER = "dlq"
    TRANSFER_DEAD_LETTER = "tdlq"
    SESSION = "session"  # one s row per session: its lock and state (S10)
    TRANSFER = "transfer"  # claimed by a forwarding step, being moved (S13, decision 010)


LANES = (Lane.MAIN, Lane.SCHEDULED, Lane.DEFERRED, Lane.DEAD_LETTER, Lane.TRANSFER_DEAD_LETTER)
ACTIVE, DEFERRED, SCHEDULED = "Active", "Deferred", "Scheduled"
MAX_DELIVERY_REASON = "MaxDeliveryCountExceeded"
TTL_REASON = "TTLExpiredException"
SESSIONLESS_REASON = "Session ID is null"
RECORD_AT = "_record_at"  # when a valid-token completion record of the row was written

Outcome = dict[str, Expr]
"""Column name -> its new value; ``_op`` says whether the row is written."""


@dataclass(frozen=True)
class ReceiveContext:
    """The literals of one receive: when, how, and the entity's limits."""

    now: datetime
    locked_until: datetime  # stamped so that the lock still has its duration at commit
    peek_lock: bool
    max_delivery_count: int
    dead_letter_on_expiry: bool
    main_queue: bool  # False for the dead-letter sub-queues: nothing there expires (S7.2)
    requires_session: bool = False  # a topic copy without session id is dead-lettered (S10.1)
    # A forwarding step's claim: picked rows go to the transfer lane under this one token
    # (the batch's), locked until ``locked_until`` (its lease), instead of a lock each.
    transfer_token: str | None = None


@dataclass(frozen=True)
class SettleContext:
    now: datetime
    kind: str  # complete | abandon | defer | dead_letter | renew
    max_delivery_count: int
    renewed_until: datetime | None = None
    reason: str | None = None
    description: str | None = None


def _lock_free(now: datetime) -> Expr:
    return col("locked_until_utc").is_null() | (col("locked_until_utc") <= now)


def _expired(ctx: ReceiveContext) -> Expr:
    return _expired_at(ctx.now, ctx.main_queue)


def _exhausted(ctx: ReceiveContext) -> Expr:
    if not ctx.main_queue:
        return lit(False)
    return col("delivery_count") >= ctx.max_delivery_count


def _due(now: datetime) -> Expr:
    return col("scheduled_enqueue_time_utc").is_null() | (
        col("scheduled_enqueue_time_utc") <= now)


def completed_by_record() -> Expr:
    """A completion record (decision 011: a blind append naming the message and its lock
    token) completes its message when it was written while that lock held: ``settle_valid``
    at the record's time. The engine finds the record by the row's own lock token and puts
    when it was written in ``_record_at`` (NULL: no record)."""
    return col(RECORD_AT).is_not_null() & (col("locked_until_utc") > col(RECORD_AT))


def deliverable(ctx: ReceiveContext) -> Expr:
    """A candidate a receive may hand out (S5.6): not deferred, not locked, due, not
    expired, below the max delivery count, not completed by a record."""
    return ((col("state") != DEFERRED) & _lock_free(ctx.now) & _due(ctx.now)
            & ~_expired(ctx) & ~_exhausted(ctx) & ~completed_by_record())


def _retired(ctx: ReceiveContext) -> Expr:
    """Available but expired (S8.2) or past its deliveries (S6.7): leaves the queue."""
    from_ledger = (col("origin") == "ledger") & _lock_free(ctx.now)
    from_inbox = (col("origin") == "inbox") & (col("_passed") == lit(True))
    return (from_ledger | from_inbox) & (_expired(ctx) | _exhausted(ctx))


def receive_outcome(ctx: ReceiveContext) -> Outcome:
    """What a receive does to each candidate row (S5.2, S5.3, S6.7, S8.2, S8.4)."""
    picked = col("_picked") == lit(True)
    void = col("_void") == lit(True)
    from_ledger = col("origin") == "ledger"
    passed_inbox = (col("origin") == "inbox") & (col("_passed") == lit(True))
    # S10.1: on a session subscription a copy without a session id is dead-lettered when
    # the cursor passes it (a session queue refuses such a send).
    sessionless = (~picked & ~void & passed_inbox & col("session_id").is_null()
                   if ctx.requires_session else lit(False))
    # A message completed by a record leaves whatever else would happen to it (S6.1).
    recorded = completed_by_record()
    retired = ~picked & ~void & ~sessionless & ~recorded & _retired(ctx)
    to_dlq = (retired & (_exhausted(ctx) | lit(ctx.dead_letter_on_expiry))) | sessionless
    waiting = ~picked & ~retired & ~void & ~sessionless & ~recorded & passed_inbox
    future = ~_due(ctx.now)
    delivered = col("delivery_count") + 1
    bumped = col("row_version") + 1
    lock = picked & lit(ctx.peek_lock)
    claimed_lane: Any = Lane.MAIN if ctx.main_queue else col("lane")
    token: Expr = col("_new_token")
    if ctx.transfer_token is not None:
        claimed_lane, token = Lane.TRANSFER, lit(ctx.transfer_token)
    op = (when(recorded, "delete")
          .when(lock, "upsert")
          .when(picked & from_ledger, "delete")
          .when(to_dlq, "upsert")
          .when(retired & from_ledger, "delete")
          .when(waiting, "upsert")
          .otherwise(lit(None)))
    return {
        "_op": op,
        "_handed": picked,
        "lane": (when(lock, claimed_lane)
                 .when(to_dlq, Lane.DEAD_LETTER)
                 .when(waiting & future, Lane.SCHEDULED)
                 .when(waiting, Lane.MAIN)
                 .otherwise(col("lane"))),
        "state": (when(lock & (col("state") == SCHEDULED), ACTIVE)
                  .when(waiting & future, SCHEDULED)
                  .otherwise(col("state"))),
        "delivery_count": when(picked, delivered).otherwise(col("delivery_count")),
        "lock_token": (when(lock, token).when(to_dlq, lit(None))
                       .otherwise(col("lock_token"))),
        "locked_until_utc": (when(lock, ctx.locked_until).when(to_dlq, lit(None))
                             .otherwise(col("locked_until_utc"))),
        "row_version": when(lock | to_dlq, bumped).otherwise(col("row_version")),
        "dead_letter_reason": (when(sessionless, SESSIONLESS_REASON)
                               .when(to_dlq & _exhausted(ctx), MAX_DELIVERY_REASON)
                               .when(to_dlq, TTL_REASON)
                               .otherwise(col("dead_letter_reason"))),
    }


DELIVERABLE = "_deliverable"  # ``deliverable`` among ``receive_rules``
# Times that stand for a receive's own in its rules' templates (``receive_rules``)
_NOW, _UNTIL = (datetime(1970, 1, 1, tzinfo=timezone.utc),
                datetime(1970, 1, 2, tzinfo=timezone.utc))


def receive_rules(ctx: ReceiveContext) -> dict[str, Callable[[Row], Any]]:
    """``receive_outcome`` and ``deliverable`` (as ``DELIVERABLE``) of ``ctx`` compiled
    (``Expr.compiled``), for a receive that applies them to every row it read: compiled
    once per context apart from its two times, which its rules use only as literals."""
    shape = replace(ctx, now=_NOW, locked_until=_UNTIL)
    return _receive_template(shape).fill(now=ctx.now, locked_until=ctx.locked_until)


@lru_cache(maxsize=64)
def _receive_template(shape: ReceiveContext) -> Template:
    rules = {**receive_outcome(shape), DELIVERABLE: deliverable(shape)}
    return Template(rules, {"now": shape.now, "locked_until": shape.locked_until})


def settle_valid(now: datetime, token: str | None = None) -> Expr:
    """The caller's lock token is the row's, and the lock has not expired (S6.6). The
    caller's token is the row's ``_token``, or ``token`` when one message is settled."""
    caller = col("_token") if token is None else lit(token)
    return (col("lock_token") == caller) & (col("locked_until_utc") > now)


def settle_outcome(ctx: SettleContext) -> Outcome:
    """What a valid settlement does to its row (S6.1-S6.5, S6.7)."""
    cleared: dict[str, Any] = {"lock_token": lit(None), "locked_until_utc": lit(None)}
    bumped = col("row_version") + 1
    if ctx.kind == "complete":
        return {"_op": lit("delete")}
    if ctx.kind == "renew":
        return {"_op": lit("upsert"), "locked_until_utc": lit(ctx.renewed_until),
                "row_version": bumped}
    if ctx.kind == "defer":
        return {"_op": lit("upsert"), **cleared, "row_version": bumped, "state": lit(DEFERRED),
                "lane": when(col("lane") == Lane.MAIN, Lane.DEFERRED).otherwise(col("lane"))}
    if ctx.kind == "dead_letter":
        return {"_op": lit("upsert"), **cleared, "row_version": bumped,
                "lane": lit(Lane.DEAD_LETTER), "state": lit(ACTIVE),
                "dead_letter_reason": lit(ctx.reason),
                "dead_letter_error_description": lit(ctx.description)}
    if ctx.kind == "abandon":
        # Past its last delivery a released message is dead-lettered (S6.7); one fetched
        # from deferral goes back to Deferred, which its lane and state still say (S6.3).
        exhausted = (col("lane") == Lane.MAIN) & (col("delivery_count") >= ctx.max_delivery_count)
        return {"_op": lit("upsert"), **cleared, "row_version": bumped,
                "lane": when(exhausted, Lane.DEAD_LETTER).otherwise(col("lane")),
                "dead_letter_reason": when(exhausted, MAX_DELIVERY_REASON)
                .otherwise(col("dead_letter_reason"))}
    raise ValueError(f"unknown settlement {ctx.kind!r}")


def deferred_valid(now: datetime, main_queue: bool = True) -> Expr:
    """A deferred message ``receive_deferred_messages`` may take (S6.3): not locked, and
    not expired (S8.2; nothing in a dead-letter sub-queue expires, S7.2)."""
    return (col("state") == DEFERRED) & _lock_free(now) & ~_expired_at(now, main_queue)


def deferred_expired(now: datetime, main_queue: bool = True) -> Expr:
    """A deferred message that expired: it leaves when a receive by its number asks for it
    (S8.2: a deferred message is looked at only then), by ``expiry_outcome``."""
    return (col("state") == DEFERRED) & _lock_free(now) & _expired_at(now, main_queue)


def expiry_outcome(dead_letter_on_expiry: bool) -> Outcome:
    """What expiry does to a message no lock holds (S8.2): to the dead-letter queue with
    reason ``TTLExpiredException`` where the entity says so, else dropped."""
    if not dead_letter_on_expiry:
        return {"_op": lit("delete")}
    return {"_op": lit("upsert"), "lock_token": lit(None), "locked_until_utc": lit(None),
            "row_version": col("row_version") + 1, "lane": lit(Lane.DEAD_LETTER),
            "state": lit(ACTIVE), "dead_letter_reason": lit(TTL_REASON)}


def _expired_at(now: datetime, main_queue: bool) -> Expr:
    if not main_queue:
        return lit(False)
    return col("expires_at_utc").is_not_null() & (col("expires_at_utc") <= now)


def deferred_outcome(ctx: ReceiveContext) -> Outcome:
    """What ``receive_deferred_messages`` does (S6.3): lock it, state still Deferred (so an
    abandon puts it back to Deferred); in receive-and-delete mode, take it."""
    delivered = col("delivery_count") + 1
    if not ctx.peek_lock:
        return {"_op": lit("delete"), "_handed": lit(True), "delivery_count": delivered}
    return {"_op": lit("upsert"), "_handed": lit(True), "delivery_count": delivered,
            "lock_token": col("_new_token"), "locked_until_utc": lit(ctx.locked_until),
            "row_version": col("row_version") + 1}


def cancel_valid(now: datetime) -> Expr:
    """A scheduled message not yet active: it can be cancelled (S8.4)."""
    return (col("state") == SCHEDULED) & col("scheduled_enqueue_time_utc").is_not_null() & (
        col("scheduled_enqueue_time_utc") > now)


def cancel_outcome() -> Outcome:
    """``cancel_scheduled_messages`` removes the message (S8.4)."""
    return {"_op": lit("delete")}


def delete_valid(now: datetime, before: datetime) -> Expr:
    """A message a batch delete removes (S5.7): active, not locked, enqueued before
    ``before``. Locked, deferred and scheduled messages stay."""
    return (col("state") == ACTIVE) & _lock_free(now) & (col("enqueued_time_utc") < before)


def delete_outcome() -> Outcome:
    """``delete_messages`` / ``purge_messages`` remove the message (S5.7)."""
    return {"_op": lit("delete")}
