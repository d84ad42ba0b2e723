"""Receive by lock or take (S5): the leased receive, its range and grouped forms.

A receive leases partitions of the entity's board, asks them in one commit
(``receive.small.receive`` decides on the driver or hands the question to Spark), and
spreads over more partitions only when the first had nothing. A bulk peek-lock receive of
fresh messages takes range locks instead (decision 018); small receives of one process's
threads share one commit (``engine.group``).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.sequence import counter_of, partition_of
from sbqueue.core.subqueues import SubQueue
from sbqueue.core.transitions import SESSIONLESS_REASON, Lane
from sbqueue.engine.group import Group, group_for
from sbqueue.engine.handle import EntityHandle
from sbqueue.engine.receive.attempt import LapsedRanges, ReceiveResult, collected, with_bodies
from sbqueue.engine.receive.on_spark import receive_once
from sbqueue.engine.receive.ranges import materialize_lapsed, receive_ranges
from sbqueue.engine.receive.small import receive, small_receive
from sbqueue.engine.settle.ops import settle
from sbqueue.exceptions import InvalidOperationError
from sbqueue.store.guarded import RETRYABLE, note_conflict, retry_conflicts
from sbqueue.store.thresholds import MIN_RANGE, SMALL_RECEIVE

__all__ = ["ask", "pass_to", "receive_dataframe", "receive_partitions", "receive_rows"]

PARTITION_BATCH = 256  # the least a receive asks of each partition it takes
RECEIVE_ATTEMPTS = 4  # conflicts or empty partitions: then it returns what it has
LEASE_WAIT_SECONDS = 10.0  # how long a receive waits for this process's threads to free one


def ask(entity: EntityHandle, partitions: list[int], share: int, total: int, peek_lock: bool
        ) -> ReceiveResult:
    """One receive attempt on ``partitions`` (their lapsed range locks first turned into
    message rows, decision 018), decided and committed once; the board learns its time."""
    started = time.monotonic()
    attempt = entity.make_attempt(partitions, share, total, peek_lock)
    lapsed = False
    try:  # a small receive's one ledger read also tells whether range locks lapsed
        result = small_receive(entity.ledger, entity.inbox, attempt, entity.lane, True)
    except LapsedRanges:
        result, lapsed = None, True
    if result is None:  # not small: lapsed ranges are looked for, then Spark decides
        if entity.lane == Lane.MAIN:
            materialize_lapsed(entity, partitions, utcnow())
        run = receive if lapsed else receive_once
        result = run(entity.ledger, entity.inbox, attempt, entity.lane)
    if result.committed:
        entity.board.saw_attempt(time.monotonic() - started)
    return result


def receive_leased(entity: EntityHandle, max_messages: int, mode: str) -> ReceiveResult | None:
    """Lease partitions, ask them, commit once; spread over more partitions only when
    the first ones had nothing; on a conflict move on to others (S14.1)."""
    refuse_sessionful(entity)
    if mode not in ("peek_lock", "receive_and_delete"):
        raise InvalidOperationError(
            f"mode {mode!r} is not 'peek_lock' or 'receive_and_delete' (S5.1)")
    if max_messages < 1:
        raise InvalidOperationError(f"max_messages is {max_messages}; at least 1 (S5.4)")
    entity.check_status("receive")
    pass_sessionless(entity)
    tried: set[int] = set(entity.fenced)  # receives continue from the others (S14.2)
    attempts, deadline = 0, time.monotonic() + LEASE_WAIT_SECONDS
    while attempts < RECEIVE_ATTEMPTS:
        chosen = entity.board.take(max_messages, exclude=tried)
        if not chosen:
            if len(tried) >= entity.partitions or time.monotonic() > deadline:
                return None
            entity.board.wait_for_free(0.2)  # other threads of this process hold them
            continue
        attempts += 1
        share = min(max_messages, max(PARTITION_BATCH, math.ceil(max_messages / len(chosen))))
        try:
            result = ask(entity, chosen, share, max_messages, mode == "peek_lock")
        except RETRYABLE as exc:
            note_conflict(f"receive from {entity.name} {chosen}", exc)
            entity.board.conflicted(chosen)
            continue
        finally:
            entity.board.release(chosen)
        entity.board.estimate(result.left)
        if result.count:
            return result
        tried.update(chosen)
    return None


def receive_dataframe(entity: EntityHandle, max_messages: int = 100_000, mode: str = "peek_lock"
                      ) -> DataFrame:
    """Lock (or take) up to ``max_messages``, returned as a DataFrame with bodies.

    Asks as few partitions as can fill the request (a bulk request takes all of them in
    one commit); every returned row is locked and every locked row is returned (S5.4).
    A receive that finds its partitions busy returns fewer rows rather than failing.
    """
    ranged = receive_ranged(entity, max_messages, mode)
    if ranged is not None:
        return ranged
    result = receive_leased(entity, max_messages, mode)
    if result is None:
        return entity.none()
    return with_bodies(entity.inbox, fresh_locks(entity, result))


def receive_ranged(entity: EntityHandle, max_messages: int, mode: str) -> DataFrame | None:
    """A bulk peek-lock receive of fresh messages as range locks (decision 018); None:
    the receive path decides (few messages asked, sessions, returned messages first)."""
    if (mode != "peek_lock" or max_messages < MIN_RANGE or entity.lane != Lane.MAIN
            or entity.props.requires_session or not entity.ledger.commits_here()):
        return None
    entity.check_status("receive")
    partitions = [p for p in range(entity.partitions) if p not in entity.fenced]
    if not partitions:
        return None  # every partition fenced: the receive path answers (S14.2)
    with entity.board.hold(partitions):
        return receive_ranges(entity, max_messages, entity.context(True), partitions)


def receive_rows(entity: EntityHandle, max_messages: int, mode: str = "peek_lock") -> list[Row]:
    """``receive_dataframe`` collected (the client's receive). Small receives of the
    threads of this process that arrive together share one commit (``engine.group``);
    each caller gets its own messages, at most ``max_messages``."""
    if max_messages > SMALL_RECEIVE:
        return receive_rows_once(entity, max_messages, mode)
    group: Group[tuple[EntityHandle, int], list[Row]] = group_for(
        ("receive", entity.ledger.path, entity.lane, mode),
        lambda: Group(lambda asks: _receive_together(asks, mode), SMALL_RECEIVE))
    return group.submit((entity, max_messages), weight=max_messages)


def receive_rows_once(entity: EntityHandle, max_messages: int, mode: str) -> list[Row]:
    """One receive, collected: a receive decided on the driver already holds its
    messages, so no body is read after its commit."""
    result = receive_leased(entity, max_messages, mode)
    if result is None:
        return []
    return collected(entity.inbox, fresh_locks(entity, result))


def fresh_locks(entity: EntityHandle, result: ReceiveResult) -> ReceiveResult:
    """A commit that outlasted the lock grace (a cold JVM, an overloaded machine) hands
    out locks with little time left: renew them once, so that the caller starts with
    most of its lock (S5.2). If some had already ended, all are returned as they were:
    the caller sees every message it was delivered (a dropped one would have used up a
    delivery unseen, S6.7), and a settlement of an ended lock reports it lost (S6.6)."""
    until, duration = result.locked_until, entity.props.lock_duration
    if until is None or until - utcnow() >= duration / 2:
        return result
    handed = result.messages if result.messages is not None else [
        r.asDict() for r in result.frame().select("sequence_number", "lock_token").collect()]
    pairs = [(int(r["sequence_number"]), str(r["lock_token"])) for r in handed]
    renewed = settle(entity, pairs, "renew")
    if renewed.lock_lost or renewed.already_settled:
        return result
    return replace(result, locked_until=renewed.locked_until)


def receive_partitions(entity: EntityHandle,
                       partitions: list[int], share: int, mode: str = "peek_lock",
                       total: int | None = None) -> DataFrame:
    """Receive from exactly these partitions, up to ``share`` from each; one commit."""
    refuse_sessionful(entity)
    entity.check_status("receive")
    entity.require_available(partitions, "receive")
    pass_sessionless(entity)
    with entity.board.hold(partitions):
        result = retry_conflicts(
            lambda: ask(entity, partitions, share, total or share * len(partitions),
                                  mode == "peek_lock"),
            what=f"receive from {entity.name} {partitions}")
    return with_bodies(entity.inbox, result)


def pass_sessionless(entity: EntityHandle) -> None:
    """S10.1: the copies a session subscription got without a session id are in its
    dead-letter queue from the send on (marked at fan-out; peek, the view and counts
    show them there at once). A receive of that dead-letter queue first moves the main
    cursor past the marked copies still after it, which stores them in the dead-letter
    lane (``receive_outcome``), where they can be locked."""
    if entity.lane != Lane.DEAD_LETTER or entity.target is None \
            or not entity.props.requires_session:
        return
    main = entity.main()
    marked = main.messages().where(
        (F.col("sub_queue") == SubQueue.DEAD_LETTER.view_name) & F.col("lock_token").isNull()
        & (F.col("dead_letter_reason") == SESSIONLESS_REASON)).select("sequence_number")
    pass_to(main, [int(r[0]) for r in marked.collect()])


def refuse_sessionful(entity: EntityHandle) -> None:
    """S10.2: a session queue's main queue is received by session, not plainly."""
    if entity.props.requires_session and entity.lane == Lane.MAIN:
        raise InvalidOperationError(
            f"{entity.path} requires sessions: receive it by session "
            "(receive_sessions_dataframe, or a session receiver) (S10.2)")


def pass_to(entity: EntityHandle, seqs: list[int]) -> None:
    """Move each partition's cursor past the highest of ``seqs`` in it (bounded steps)."""
    targets = highest_per_partition(seqs)
    for _ in range(64):
        counters = entity.ledger.counters()
        behind = {p: seq for p, seq in targets.items()
                  if counters.get(p, 0) < counter_of(seq)}
        if not behind:
            return
        attempt = entity.make_attempt(sorted(behind), 0, 0, True,
                                     pass_to=tuple(sorted(behind.items())))
        with entity.board.hold(sorted(behind)):
            retry_conflicts(lambda a=attempt: receive(  # type: ignore[misc]
                entity.ledger, entity.inbox, a, Lane.MAIN),
                what=f"pass the cursors of {entity.name}")


def highest_per_partition(seqs: list[int]) -> dict[int, int]:
    """Partition -> the highest of ``seqs`` in it: where a cursor must pass to."""
    targets: dict[int, int] = {}
    for seq in seqs:
        targets[partition_of(seq)] = max(targets.get(partition_of(seq), 0), seq)
    return targets


def _receive_together(asks: list[tuple[EntityHandle, int]], mode: str) -> list[list[Row]]:
    """The receives of several callers as one (the first caller's entity object): each
    gets, in turn, up to what it asked of the messages handed out."""
    rows = receive_rows_once(asks[0][0], sum(n for _, n in asks), mode)
    out, start = [], 0
    for _, n in asks:
        out.append(rows[start:start + n])
        start += n
    return out
