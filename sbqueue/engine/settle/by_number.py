"""Operations on messages named by sequence number: deferred receives (S6.3, S8.2),
scheduled cancels (S8.4), batch deletes (S5.7), and the numbers a send stored (S3.4).

Each is one commit over the partitions of its numbers, all or nothing where the rule says
so (``all_by_sequence``: MessageNotFound names the numbers that are not valid and nothing
changes). ``settle.apply.apply_by_sequence`` decides and commits on the driver where it can.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.expr import Expr
from sbqueue.core.sequence import partition_of
from sbqueue.core.transitions import (
    Lane,
    Outcome,
    ReceiveContext,
    cancel_outcome,
    cancel_valid,
    deferred_expired,
    deferred_outcome,
    deferred_valid,
    delete_outcome,
    delete_valid,
    expiry_outcome,
)
from sbqueue.engine.handle import EntityHandle
from sbqueue.engine.receive.attempt import ReceiveResult, collected, with_bodies
from sbqueue.engine.receive.handed import messages_here
from sbqueue.engine.receive.ops import highest_per_partition, pass_to
from sbqueue.engine.receive.ranges import materialize_lapsed
from sbqueue.engine.receive.small import NotCancellable, cancel
from sbqueue.engine.settle.apply import Applied, apply_by_sequence
from sbqueue.exceptions import MessageNotFoundError
from sbqueue.store.guarded import retry_conflicts

__all__ = [
    "cancel_scheduled",
    "delete_messages",
    "receive_deferred",
    "receive_deferred_rows",
]


def receive_deferred(entity: EntityHandle, sequence_numbers: list[int], mode: str = "peek_lock"
                     ) -> DataFrame:
    """The deferred messages with these numbers, locked (or taken in receive-and-delete
    mode), with bodies; MessageNotFound if one is unknown or locked by another (S6.3)."""
    entity.check_status("receive")
    if not sequence_numbers:
        return entity.none()
    return with_bodies(entity.inbox, deferred_result(entity, sequence_numbers, mode))


def receive_deferred_rows(entity: EntityHandle, sequence_numbers: list[int], mode: str = "peek_lock"
                          ) -> list[Row]:
    """``receive_deferred`` as rows, by sequence number: no Spark job where the local
    executor decided it (the client's call)."""
    entity.check_status("receive")
    if not sequence_numbers:
        return []
    rows = collected(entity.inbox, deferred_result(entity, sequence_numbers, mode))
    return sorted(rows, key=lambda r: int(r["sequence_number"]))


def deferred_result(entity: EntityHandle, sequence_numbers: list[int], mode: str) -> ReceiveResult:
    """The deferred messages ``sequence_numbers`` locked (or taken) in one commit, all or
    none (S6.3); on a refusal the expired among them leave as expiry says (S8.2)."""
    lane = Lane.DEFERRED if entity.lane == Lane.MAIN else entity.lane
    ctx, seqs = entity.context(mode == "peek_lock"), sorted(set(sequence_numbers))
    try:
        applied = all_by_sequence(
            entity, seqs, (lane,), lambda now: deferred_valid(now, ctx.main_queue),
            deferred_outcome(ctx), "receive deferred",
            "(unknown, not deferred, expired, or locked by another receiver; S6.3, S8.2)")
    except MessageNotFoundError as exc:
        expire_deferred(entity, seqs, lane, ctx, exc)
        raise
    assert applied.changes is not None
    return ReceiveResult(
        handed=applied.changes, locators=applied.locators, count=len(applied.valid),
        left={}, committed=True,
        locked_until=min(ctx.locked_until, utcnow() + entity.props.lock_duration)
        if mode == "peek_lock" else None,
        messages=None if applied.rows is None else messages_here(entity.inbox, applied.rows))


def expire_deferred(entity: EntityHandle, seqs: list[int], lane: str, ctx: ReceiveContext,
                     refused: MessageNotFoundError) -> None:
    """After a refused ``receive_deferred``: those of ``seqs`` that are deferred and
    expired leave as expiry says (S8.2: a deferred message expires when asked for), in
    one commit, and the refusal names them."""
    partitions = sorted({partition_of(seq) for seq in seqs})

    def attempt() -> Applied:
        return apply_by_sequence(
            entity.ledger, [(s, None) for s in seqs], (lane,),
            deferred_expired(utcnow(), ctx.main_queue),
            expiry_outcome(ctx.dead_letter_on_expiry))

    with entity.board.hold(partitions):
        expired = retry_conflicts(attempt, what=f"expire deferred on {entity.name}").valid
    if expired:
        went = ("moved to the dead-letter queue" if ctx.dead_letter_on_expiry
                else "dropped")
        raise MessageNotFoundError(
            f"receive deferred in {entity.path}: sequence number(s) {expired} expired "
            f"(S8.2) and were {went}; no message was received") from refused



def cancel_scheduled(entity: EntityHandle, sequence_numbers: list[int]) -> None:
    """Remove scheduled messages not yet active; MessageNotFound for any other (S8.4).
    One commit decided on the driver when it can be (``receive.small.cancel``: the
    cursor passes the messages without storing them, ledger rows are deleted); else
    the cursor first passes them (a receive that hands out nothing), then their ledger
    rows are deleted."""
    entity.check_status("send")
    seqs = sorted(set(sequence_numbers))
    if not seqs:
        return
    entity.require_available(sorted({partition_of(seq) for seq in seqs}), "cancel")
    if cancel_at_once(entity, seqs):
        return
    pass_to(entity, seqs)
    all_by_sequence(entity, seqs, (Lane.SCHEDULED, Lane.MAIN), cancel_valid, cancel_outcome(),
                          "cancel", "(unknown, cancelled or already active; S8.4)")


def delete_messages(entity: EntityHandle, max_messages: int, before: datetime,
                    session_id: str | None = None) -> int:
    """Batch delete (S5.7): up to ``max_messages`` active, unlocked messages of this
    sub-queue (of ``session_id``) enqueued before ``before``, oldest first, in one
    commit; how many were removed. One locked meanwhile is left and not counted."""
    entity.check_status("receive")
    now = utcnow()
    view = entity.messages().where(
        (F.col("sub_queue") == entity.sub_queue.view_name) & (F.col("state") == "Active")
        & (F.col("locked_until_utc").isNull() | (F.col("locked_until_utc") <= F.lit(now)))
        & (F.col("enqueued_time_utc") < F.lit(before)))
    if session_id is not None:
        view = view.where(F.col("session_id") == session_id)
    seqs = [int(r[0]) for r in view.orderBy("enqueued_time_utc", "sequence_number")
            .limit(max_messages).select("sequence_number").collect()]
    if not seqs:
        return 0
    if entity.lane == Lane.MAIN:
        pass_to(entity, seqs)  # messages the cursors have not passed get ledger rows
        materialize_lapsed(entity, sorted({partition_of(s) for s in seqs}), now)
    partitions = sorted({partition_of(seq) for seq in seqs})
    entity.require_available(partitions, "delete")
    with entity.board.hold(partitions):
        applied = retry_conflicts(lambda: apply_by_sequence(
            entity.ledger, [(s, None) for s in seqs], (entity.lane,),
            delete_valid(utcnow(), before), delete_outcome()),
            what=f"delete on {entity.name} {partitions}")
    return len(applied.valid)


def all_by_sequence(entity: EntityHandle, seqs: list[int], lanes: tuple[str, ...],
                     valid: Callable[[datetime], Expr], outcome: Outcome, what: str,
                     why: str) -> Applied:
    """Apply ``outcome`` to every one of ``seqs`` in one commit, or to none of them and
    raise MessageNotFound naming those that are not valid."""
    partitions = sorted({partition_of(seq) for seq in seqs})
    entity.require_available(partitions, what)

    def attempt() -> Applied:
        return apply_by_sequence(entity.ledger, [(s, None) for s in seqs],
                                 lanes, valid(utcnow()), outcome, require_all=True)

    with entity.board.hold(partitions):
        applied = retry_conflicts(attempt, what=f"{what} on {entity.name} {partitions}")
    absent = sorted({*applied.missing, *applied.invalid})
    if absent:
        raise MessageNotFoundError(
            f"{what} in {entity.path}: no message with sequence number(s) {absent} {why}; "
            "nothing was changed")
    return applied


def cancel_at_once(entity: EntityHandle, seqs: list[int]) -> bool:
    """``cancel_scheduled`` in one commit, or False (nothing done) when the driver
    cannot decide it."""
    if entity.lane != Lane.MAIN or entity.dedupe is not None:
        return False
    targets = highest_per_partition(seqs)
    partitions = sorted(targets)

    def attempt() -> bool:
        a = replace(entity.make_attempt(partitions, 0, 0, True,
                                      pass_to=tuple(sorted(targets.items()))),
                    cancel=tuple(seqs))
        return cancel(entity.ledger, entity.inbox, a)

    try:
        with entity.board.hold(partitions):
            return retry_conflicts(attempt, what=f"cancel on {entity.name} {partitions}")
    except NotCancellable as exc:
        raise MessageNotFoundError(
            f"cancel in {entity.path}: no message with sequence number(s) {exc.seqs} "
            "(unknown, cancelled or already active; S8.4); nothing was changed") from None
