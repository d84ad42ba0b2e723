"""Settle by lock (S6): complete, abandon, defer, dead-letter or renew locked messages.

One settlement is one commit over the partitions it touches, under their hold on the
board, retried on conflicts. A client's single complete may join the process's group
commit of completion records (decision 011); a lock token of a range lock (decision 018,
``core.tokens``) settles its range first, on either executor.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from pyspark.sql import DataFrame

from sbqueue.core.clock import utcnow
from sbqueue.core.sequence import partition_of
from sbqueue.core.tokens import is_range_token
from sbqueue.core.transitions import Lane, SettleContext
from sbqueue.engine.group import Group, group_for
from sbqueue.engine.handle import EntityHandle
from sbqueue.engine.reads.view import may_hold_windows
from sbqueue.engine.receive.attempt import lock_stamp
from sbqueue.engine.receive.ranges import (
    Span,
    frame_spans,
    ranges_in,
    settle_ranges,
    spans_of,
    stated_spans,
)
from sbqueue.engine.settle.apply import SettleResult, complete_by_records, settle_once
from sbqueue.exceptions import InvalidOperationError
from sbqueue.store.guarded import retry_conflicts

__all__ = ["check_settle", "materialize_ranges", "settle", "settle_dataframe"]

SETTLE_KINDS = ("complete", "abandon", "defer", "dead_letter", "renew")
COMPLETE_GROUP = 1000  # completion records one group commit carries at most


def settle(entity: EntityHandle, locks: list[tuple[int, str]], kind: str, reason: str | None = None,
           description: str | None = None, *, held_until: datetime | None = None,
           deferred: bool = False) -> SettleResult:
    """Settle (sequence number, lock token) pairs in one commit over their partitions.

    Pairs whose lock expired or whose token is not the current one are reported in
    ``lock_lost``, those no longer in the entity in ``already_settled``; neither is
    changed (S6.6). ``held_until``: when the holder of one lock was told it ends (a
    complete is then a completion record, decision 011); ``deferred``: that message was
    received by sequence number from deferral.
    """
    if not locks:
        check_settle(entity, kind, [])
        return SettleResult()
    lanes = (Lane.MAIN, Lane.DEFERRED) if entity.lane == Lane.MAIN else (entity.lane,)
    partitions = sorted({partition_of(seq) for seq, _ in locks})
    check_settle(entity, kind, partitions)
    if kind == "complete" and len(locks) == 1 and held_until is not None \
            and not deferred and entity.records_allowed:  # a client's lock: never a range
        done = completes(entity).submit((*locks[0], held_until))
        if done is not None:
            return done

    ranged, whole = settle_range_locks(entity, spans_of(locks), kind)
    locks = [(seq, token) for seq, token in locks if (partition_of(seq), token) not in whole]
    if not locks:
        return ranged

    def attempt() -> SettleResult:
        now = utcnow()
        ctx = SettleContext(
            now=now, kind=kind, max_delivery_count=entity.props.max_delivery_count,
            renewed_until=lock_stamp(now, entity.props.lock_duration, 0.0),
            reason=reason, description=description)
        return settle_once(entity.ledger, locks, lanes, ctx)

    with entity.board.hold(partitions):
        result = retry_conflicts(attempt, what=f"{kind} on {entity.name} {partitions}")
    return replace(result, settled=result.settled + ranged.settled)


def check_settle(entity: EntityHandle, kind: str, partitions: list[int]) -> None:
    """Refuse a settlement this entity cannot make, before anything is changed."""
    if kind not in SETTLE_KINDS:
        raise InvalidOperationError(f"unknown settlement {kind!r}")
    if kind == "dead_letter" and entity.sub_queue.is_dead_letter:
        raise InvalidOperationError(
            f"{entity.name}/{entity.sub_queue.view_name}: a dead-lettered message cannot "
            "be dead-lettered again (S7.2)")
    if partitions:
        entity.check_status("receive")
        entity.require_available(partitions, kind)


def completes(entity: EntityHandle) -> Group[tuple[int, str, datetime], SettleResult | None]:
    """The process's group commit of completion records for this entity's lane."""
    ledger, lane = entity.ledger, entity.lane
    return group_for(("complete", ledger.path, lane), lambda: Group(
        lambda locks: complete_by_records(ledger, locks, lane), COMPLETE_GROUP))


def settle_dataframe(entity: EntityHandle, batch: DataFrame, kind: str, reason: str | None = None,
                     description: str | None = None) -> SettleResult:
    """Settle the rows of ``batch`` whose locks are valid; report the others."""
    ranged, done = SettleResult(), set[tuple[int, str]]()
    if entity.lane == Lane.MAIN and may_hold_windows(entity.ledger, (Lane.MAIN,)):
        spans = stated_spans(batch) or frame_spans(batch)
        check_settle(entity, kind, sorted({p for p, _ in spans}))
        ranged, done = settle_range_locks(entity, spans, kind)
        if done and done >= spans.keys():
            return ranged  # every row was in a range settled whole
    pairs = (batch.where(~ranges_in(done)) if done else batch).select(
        "sequence_number", "lock_token").collect()
    result = settle(entity, [(int(r[0]), r[1]) for r in pairs], kind, reason, description)
    return replace(result, settled=result.settled + ranged.settled)


def materialize_ranges(entity: EntityHandle, locks: list[tuple[int, str]]) -> None:
    """Turn the range locks (decision 018) ``locks`` touch into message rows, so that a
    path reading messages by sequence number (a transaction) finds them."""
    settle_range_locks(entity, spans_of(locks), "materialize")


def settle_range_locks(entity: EntityHandle, asked: dict[tuple[int, str], Span], kind: str
                   ) -> tuple[SettleResult, set[tuple[int, str]]]:
    """``receive.ranges.settle_ranges`` of the keys whose token is a range lock's
    (``core.tokens``), under the partitions' hold, retried on conflicts."""
    asked = {key: span for key, span in asked.items() if is_range_token(key[1])}
    if not asked or entity.lane != Lane.MAIN:  # ranges live in the main queue
        return SettleResult(), set()
    partitions = sorted({p for p, _ in asked})
    with entity.board.hold(partitions):
        return retry_conflicts(lambda: settle_ranges(entity, asked, kind, utcnow()),
                               what=f"{kind} of range locks on {entity.name}")
