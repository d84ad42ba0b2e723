"""Operations on one entity as DataFrames: send, receive (lock), settle, peek, count.

The entity is a queue or a subscription, or one of their dead-letter sub-queues (a
subscription reads its topic's inbox, decision 009). Sends append to the inbox
(``send``); receives and settlements commit to the ledger partitions they change
(``receive``, ``settle``); reads never commit (``reads``). Concurrent callers in one
process share a ``PartitionBoard``, so threads spread over partitions instead of
conflicting. Why this layout: docs/decisions/004-cursor-layout.md.
"""

from __future__ import annotations

import math
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from sbqueue.core.clock import as_utc, utcnow
from sbqueue.core.duplicates import dedupe_window
from sbqueue.core.expr import Expr
from sbqueue.core.names import SUBSCRIPTIONS_SEGMENT
from sbqueue.core.properties import (
    EntityStatus,
    QueueProperties,
    SubscriptionProperties,
    TopicProperties,
)
from sbqueue.core.routing import RoundRobin
from sbqueue.core.sequence import counter_of, partition_of
from sbqueue.core.sizes import check_dead_letter_text
from sbqueue.core.subqueues import SubQueue
from sbqueue.core.tokens import is_range_token
from sbqueue.core.transitions import (
    SESSIONLESS_REASON,
    Lane,
    Outcome,
    ReceiveContext,
    SettleContext,
    cancel_outcome,
    cancel_valid,
    deferred_expired,
    deferred_outcome,
    deferred_valid,
    delete_outcome,
    delete_valid,
    expiry_outcome,
)
from sbqueue.engine.group import Group, group_for
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.numbers import send_numbers
from sbqueue.engine.partitions import board_for
from sbqueue.engine.peek_here import peek_here
from sbqueue.engine.quota import Quota
from sbqueue.engine.reads import (
    count_messages,
    inbox_bound,
    last_commit,
    may_hold_windows,
    messages,
)
from sbqueue.engine.receive import (
    Attempt,
    ReceiveResult,
    collected,
    lock_stamp,
    with_bodies,
)
from sbqueue.engine.receive_range import (
    MIN_RANGE,
    Span,
    frame_spans,
    materialize_lapsed,
    ranges_in,
    receive_ranges,
    settle_ranges,
    spans_of,
    stated_spans,
)
from sbqueue.engine.receive_small import (
    SMALL_RECEIVE,
    NotCancellable,
    cancel,
    messages_here,
    receive,
)
from sbqueue.engine.send import SendResult, send_dataframe
from sbqueue.engine.send_small import (
    SMALL_SEND,
    Outgoing,
    commit_once,
    forwarded_rows,
    inbox_rows,
    result_of,
)
from sbqueue.engine.sessions import Sessions, SessionStateResult
from sbqueue.engine.settle import (
    Applied,
    SettleResult,
    apply_by_sequence,
    complete_by_records,
    settle_once,
)
from sbqueue.engine.storage_guard import storage_guarded
from sbqueue.engine.tally import Held, held_here, per_partition, tally
from sbqueue.exceptions import (
    InvalidOperationError,
    MessageNotFoundError,
    MessagingEntityDisabledError,
    PartitionUnavailableError,
)
from sbqueue.store.guarded import RETRYABLE, note_conflict, retry_conflicts

if TYPE_CHECKING:
    from sbqueue.engine.namespace import Namespace

__all__ = ["Entity", "SendResult", "SettleResult"]

SETTLE_KINDS = ("complete", "abandon", "defer", "dead_letter", "renew")
PARTITION_BATCH = 256  # the least a receive asks of each partition it takes
RECEIVE_ATTEMPTS = 4  # conflicts or empty partitions: then it returns what it has
LEASE_WAIT_SECONDS = 10.0  # how long a receive waits for this process's threads to free one
COMPLETE_GROUP = 1000  # completion records one group commit carries at most



@storage_guarded
class Entity:
    """One queue or subscription (or one of their sub-queues), operated on with DataFrames.
    A subscription reads its copies from its topic's inbox (``target``: its entity id)
    through a ledger of its own (decision 009)."""

    def __init__(self, namespace: Namespace, props: QueueProperties | SubscriptionProperties,
                 sub_queue: SubQueue = SubQueue.MAIN) -> None:
        self.namespace = namespace
        self.props = props
        self.sub_queue = sub_queue
        self.lane = sub_queue.lane
        self.spark = namespace.spark
        self.topic: TopicProperties | None = None
        self.target: str | None = None
        inbox_owner = props.entity_id
        if isinstance(props, SubscriptionProperties):
            self.topic = namespace.catalog.get("topic", props.topic_name)
            self.target = props.entity_id
            inbox_owner = self.topic.entity_id
        self.inbox = Inbox(self.spark, namespace.catalog.data_path(inbox_owner, "inbox"))
        self.ledger = Ledger(self.spark, namespace.catalog.data_path(props.entity_id, "ledger"))
        self.partitions = props.partition_count
        self.board = board_for(self.ledger.path, self.partitions)
        owner = self.topic if self.topic is not None else self.props
        self.quota = Quota(self.path, lambda: int(getattr(owner, "max_size_in_megabytes", 1024)),
                           self.partitions, lambda: inbox_bound(self.inbox),
                           lambda: int(self.counts()["size_in_bytes"]))
        self.fenced: frozenset[int] = frozenset()  # unavailable partitions (S14.2)
        # Unkeyed client sends, round robin from a random partition (S4.3).
        self._spread = RoundRobin(self.partitions, random.randrange(max(1, self.partitions)))
        self._records: bool | None = None  # completes as records (``records_allowed``)

    @property
    def name(self) -> str:
        """The entity path without sub-queue: ``q`` or ``topic/Subscriptions/sub``."""
        if isinstance(self.props, SubscriptionProperties):
            return f"{self.props.topic_name}/{SUBSCRIPTIONS_SEGMENT}/{self.props.name}"
        return self.props.name

    @property
    def path(self) -> str:
        """The entity path as Service Bus spells it (``q``, ``q/$DeadLetterQueue``)."""
        return self.sub_queue.path(self.name)

    @property
    def inbox_path(self) -> str:
        return self.inbox.path

    @property
    def ledger_path(self) -> str:
        return self.ledger.path

    @property
    def dedupe(self) -> timedelta | None:
        """The duplicate detection window: the queue's, or a subscription's topic's (S11)."""
        return dedupe_window(self.topic if self.topic is not None else self.props)

    @property
    def max_message_kilobytes(self) -> int | None:
        """The message size limit: the queue's, or a subscription's topic's (S2.4)."""
        owner = self.topic if self.topic is not None else self.props
        return getattr(owner, "max_message_size_in_kilobytes", None)

    def _reload(self) -> None:
        props = self.props
        if isinstance(props, SubscriptionProperties):
            self.props = self.namespace.catalog.get("subscription", props.name,
                                                    props.topic_name)
        else:
            self.props = self.namespace.catalog.get_queue(props.name)

    def check_status(self, operation: str) -> None:
        """S16.1: refuse a send to a Disabled or SendDisabled entity, a receive or settle on
        a Disabled or ReceiveDisabled one. Reads the current definition (a status change
        by the administrator takes effect at once)."""
        self._reload()
        self.fenced = self.namespace.catalog.fenced(self.props.entity_id)
        blocked = {"send": (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED),
                   "receive": (EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED)}[operation]
        if self.props.status in blocked:
            raise MessagingEntityDisabledError(
                f"{self.path} is {self.props.status.value}: {operation} refused (S16.1)")

    # -- send ------------------------------------------------------------------------------
    def send_dataframe(self, df: DataFrame, round_robin_start: int = 0,
                       incoming_bytes: int = 0, send_id: str | None = None,
                       forwarded: bool = False, idempotent: bool = False,
                       in_send_order: bool = False) -> SendResult:
        """Append ``df`` (``body`` plus any message column of S2.1) in one commit.
        ``incoming_bytes``: the send's size when the caller knows it (the client), for the
        size quota (S1.6); ``send_id``: a transaction's (decision 008) or, ``forwarded``,
        a forwarding step's batch; ``idempotent``: at most once per send id (decision
        010); ``in_send_order``: the caller reads the send's numbers in send order
        (``sequence_numbers``), else batch indexes are grouped by partition (decision
        018: a bulk receive of them numbers runs, no join)."""
        props = self._check_sendable()
        self.quota.check(incoming_bytes)
        result = send_dataframe(df, props, self.inbox, round_robin_start,
                                self.fenced, send_id, forwarded=forwarded,
                                idempotent=idempotent, by_partition=not in_send_order)
        self.quota.add(result.size_in_bytes)
        return result

    def send_messages(self, messages: Sequence[Outgoing], incoming_bytes: int,
                      as_dataframe: Callable[[], DataFrame], send_id: str | None = None
                      ) -> SendResult:
        """A client send: decided and committed on the driver where the inbox is local and
        the send small (``engine.send_small``, no Spark job); else ``as_dataframe()`` sent
        as a DataFrame. The same rows either way. ``send_id``: a transaction's."""
        if len(messages) > SMALL_SEND or not self.inbox.commits_here():
            return self.send_dataframe(as_dataframe(), incoming_bytes=incoming_bytes,
                                       send_id=send_id, in_send_order=True)
        props = self._check_sendable()
        self.quota.check(incoming_bytes)
        send_id = send_id or uuid.uuid4().hex
        rows = inbox_rows(messages, props, self.fenced, self._spread, send_id)
        version = self.inbox.append_small(rows, send_id)
        if version is None:
            return self.send_dataframe(as_dataframe(), incoming_bytes=incoming_bytes,
                                       send_id=send_id, in_send_order=True)
        result = result_of(rows, send_id, version)
        self.quota.add(result.size_in_bytes)
        return result

    def send_forwarded(self, rows: Sequence[Mapping[str, Any]], send_id: str) -> bool:
        """A forwarding batch (source inbox rows, numbered) appended on the driver, at most
        once per ``send_id`` (``send_small.forwarded_rows``, ``Inbox.append_once``); False,
        nothing stored, where it must be sent through Spark."""
        if not self.inbox.commits_here():
            return False
        props = self._check_sendable()
        out = forwarded_rows(rows, props, self.fenced, self._spread, send_id)
        size = sum(int(r["size_in_bytes"]) for r in out)
        self.quota.check(size)
        done = self.inbox.append_once(out, send_id)
        if done:
            self.quota.add(size)
        return done is not None

    def send_once(self, messages: Sequence[Outgoing], app_id: str, version: int) -> bool:
        """Send ``messages`` in one driver commit, at most once per ``(app_id, version)``
        (``send_small.commit_once``; a streaming sink's batch, decision 024)."""
        return commit_once(
            self.inbox, self.quota, self.name, app_id, version,
            lambda send_id: inbox_rows(messages, self._check_sendable(), self.fenced,
                                       self._spread, send_id))

    def require_available(self, partitions: list[int], operation: str) -> None:
        """S14.2: an operation on an unavailable partition fails (checked after
        ``check_status`` read the current fence)."""
        down = sorted(set(partitions) & self.fenced)
        if down:
            raise PartitionUnavailableError(
                f"{self.path}: partition(s) {down} are unavailable; {operation} refused (S14.2)")

    def _check_sendable(self) -> QueueProperties:
        """S7.2, S15.2: only a queue's main queue takes sends, when its status allows them;
        the queue's properties."""
        if self.sub_queue.is_dead_letter:
            raise InvalidOperationError(
                f"{self.name}/{self.sub_queue.view_name}: nothing can be sent to a "
                "dead-letter queue (S7.2)")
        if not isinstance(self.props, QueueProperties):
            raise InvalidOperationError(
                f"{self.name}: a subscription receives what its topic's rules give it; send "
                "to the topic (S15.2)")
        self.check_status("send")
        return self.props

    # -- receive ---------------------------------------------------------------------------
    def _context(self, peek_lock: bool) -> ReceiveContext:
        now = utcnow()
        return ReceiveContext(
            now=now, locked_until=lock_stamp(now, self.props.lock_duration,
                                             self.board.lock_grace()),
            peek_lock=peek_lock, max_delivery_count=self.props.max_delivery_count,
            dead_letter_on_expiry=self.props.dead_lettering_on_message_expiration,
            main_queue=self.lane == Lane.MAIN, requires_session=self.props.requires_session)

    def make_attempt(self, partitions: list[int], share: int, total: int, peek_lock: bool,
                      pass_to: tuple[tuple[int, int], ...] = ()) -> Attempt:
        return Attempt(
            partitions=partitions, share=share, total=total, ctx=self._context(peek_lock),
            lock_duration=self.props.lock_duration,
            latest_version=self.inbox.version() if self.lane == Lane.MAIN else 0,
            pass_to=pass_to, dedupe=self.dedupe, target=self.target)

    def _attempt(self, partitions: list[int], share: int, total: int, peek_lock: bool
                 ) -> ReceiveResult:
        started = time.monotonic()
        if self.lane == Lane.MAIN:
            materialize_lapsed(self, partitions, utcnow())
        attempt = self.make_attempt(partitions, share, total, peek_lock)
        result = receive(self.ledger, self.inbox, attempt, self.lane)
        if result.committed:
            self.board.saw_attempt(time.monotonic() - started)
        return result

    def _receive(self, max_messages: int, mode: str) -> ReceiveResult | None:
        """Lease partitions, ask them, commit once; spread over more partitions only when
        the first ones had nothing; on a conflict move on to others (S14.1)."""
        self._refuse_sessionful()
        if mode not in ("peek_lock", "receive_and_delete"):
            raise InvalidOperationError(
                f"mode {mode!r} is not 'peek_lock' or 'receive_and_delete' (S5.1)")
        if max_messages < 1:
            raise InvalidOperationError(f"max_messages is {max_messages}; at least 1 (S5.4)")
        self.check_status("receive")
        self._pass_sessionless()
        tried: set[int] = set(self.fenced)  # receives continue from the others (S14.2)
        attempts, deadline = 0, time.monotonic() + LEASE_WAIT_SECONDS
        while attempts < RECEIVE_ATTEMPTS:
            chosen = self.board.take(max_messages, exclude=tried)
            if not chosen:
                if len(tried) >= self.partitions or time.monotonic() > deadline:
                    return None
                self.board.wait_for_free(0.2)  # other threads of this process hold them
                continue
            attempts += 1
            share = min(max_messages, max(PARTITION_BATCH, math.ceil(max_messages / len(chosen))))
            try:
                result = self._attempt(chosen, share, max_messages, mode == "peek_lock")
            except RETRYABLE as exc:
                note_conflict(f"receive from {self.name} {chosen}", exc)
                self.board.conflicted(chosen)
                continue
            finally:
                self.board.release(chosen)
            self.board.estimate(result.left)
            if result.count:
                return result
            tried.update(chosen)
        return None

    def receive_dataframe(self, max_messages: int = 100_000, mode: str = "peek_lock"
                          ) -> DataFrame:
        """Lock (or take) up to ``max_messages``, returned as a DataFrame with bodies.

        Asks as few partitions as can fill the request (a bulk request takes all of them in
        one commit); every returned row is locked and every locked row is returned (S5.4).
        A receive that finds its partitions busy returns fewer rows rather than failing.
        """
        ranged = self._receive_ranges(max_messages, mode)
        if ranged is not None:
            return ranged
        result = self._receive(max_messages, mode)
        if result is None:
            return self.none()
        return with_bodies(self.inbox, self._fresh_locks(result))

    def _receive_ranges(self, max_messages: int, mode: str) -> DataFrame | None:
        """A bulk peek-lock receive of fresh messages as range locks (decision 018); None:
        the receive path decides (few messages asked, sessions, returned messages first)."""
        if (mode != "peek_lock" or max_messages < MIN_RANGE or self.lane != Lane.MAIN
                or self.props.requires_session or not self.ledger.commits_here()):
            return None
        self.check_status("receive")
        partitions = [p for p in range(self.partitions) if p not in self.fenced]
        if not partitions:
            return None  # every partition fenced: the receive path answers (S14.2)
        with self.board.hold(partitions):
            return receive_ranges(self, max_messages, self._context(True), partitions)

    def receive_rows(self, max_messages: int, mode: str = "peek_lock") -> list[Row]:
        """``receive_dataframe`` collected (the client's receive). Small receives of the
        threads of this process that arrive together share one commit (``engine.group``);
        each caller gets its own messages, at most ``max_messages``."""
        if max_messages > SMALL_RECEIVE:
            return self._receive_rows(max_messages, mode)
        group: Group[tuple[Entity, int], list[Row]] = group_for(
            ("receive", self.ledger.path, self.lane, mode),
            lambda: Group(lambda asks: _receive_together(asks, mode), SMALL_RECEIVE))
        return group.submit((self, max_messages), weight=max_messages)

    def _receive_rows(self, max_messages: int, mode: str) -> list[Row]:
        """One receive, collected: a receive decided on the driver already holds its
        messages, so no body is read after its commit."""
        result = self._receive(max_messages, mode)
        if result is None:
            return []
        return collected(self.inbox, self._fresh_locks(result))

    def _fresh_locks(self, result: ReceiveResult) -> ReceiveResult:
        """A commit that outlasted the lock grace (a cold JVM, an overloaded machine) hands
        out locks with little time left: renew them once, so that the caller starts with
        most of its lock (S5.2). If some had already ended, all are returned as they were:
        the caller sees every message it was delivered (a dropped one would have used up a
        delivery unseen, S6.7), and a settlement of an ended lock reports it lost (S6.6)."""
        until, duration = result.locked_until, self.props.lock_duration
        if until is None or until - utcnow() >= duration / 2:
            return result
        handed = result.messages if result.messages is not None else [
            r.asDict() for r in result.frame().select("sequence_number", "lock_token").collect()]
        pairs = [(int(r["sequence_number"]), str(r["lock_token"])) for r in handed]
        renewed = self.settle(pairs, "renew")
        if renewed.lock_lost or renewed.already_settled:
            return result
        return replace(result, locked_until=renewed.locked_until)

    def receive_partitions(self, partitions: list[int], share: int, mode: str = "peek_lock",
                           total: int | None = None) -> DataFrame:
        """Receive from exactly these partitions, up to ``share`` from each; one commit."""
        self._refuse_sessionful()
        self.check_status("receive")
        self.require_available(partitions, "receive")
        self._pass_sessionless()
        with self.board.hold(partitions):
            result = retry_conflicts(
                lambda: self._attempt(partitions, share, total or share * len(partitions),
                                      mode == "peek_lock"),
                what=f"receive from {self.name} {partitions}")
        return with_bodies(self.inbox, result)

    def _pass_sessionless(self) -> None:
        """S10.1: the copies a session subscription got without a session id are in its
        dead-letter queue from the send on (marked at fan-out; peek, the view and counts
        show them there at once). A receive of that dead-letter queue first moves the main
        cursor past the marked copies still after it, which stores them in the dead-letter
        lane (``receive_outcome``), where they can be locked."""
        if self.lane != Lane.DEAD_LETTER or self.target is None \
                or not self.props.requires_session:
            return
        main = Entity(self.namespace, self.props)
        marked = main.messages().where(
            (F.col("sub_queue") == SubQueue.DEAD_LETTER.view_name) & F.col("lock_token").isNull()
            & (F.col("dead_letter_reason") == SESSIONLESS_REASON)).select("sequence_number")
        main._pass_to([int(r[0]) for r in marked.collect()])

    def _refuse_sessionful(self) -> None:
        if self.props.requires_session and self.lane == Lane.MAIN:
            raise InvalidOperationError(
                f"{self.path} requires sessions: receive it by session "
                "(receive_sessions_dataframe, or a session receiver) (S10.2)")

    # -- sessions (S10) --------------------------------------------------------------------
    @property
    def sessions(self) -> Sessions:
        """Session locks, session receives and state; InvalidOperation unless the entity
        requires sessions (S10.2)."""
        return Sessions(self)

    def receive_sessions_dataframe(self, max_sessions: int = 8,
                                   max_messages_per_session: int = 100,
                                   mode: str = "peek_lock") -> DataFrame:
        """Lock up to ``max_sessions`` available sessions and return up to
        ``max_messages_per_session`` messages of each, with ``session_lock_token``: process
        them with ``groupBy("session_id")`` in sequence order, then settle, set state
        (``set_session_states``) and ``release_sessions``."""
        return self.sessions.receive_dataframe(max_sessions, max_messages_per_session, mode)

    def session_states(self) -> DataFrame:
        """session_id, partition_id, state (bytes or null), locked_until_utc (S10.5)."""
        return self.sessions.states()

    def set_session_states(self, df: DataFrame) -> SessionStateResult:
        """Set the state of the sessions of ``df`` (session_id, state, session_lock_token)."""
        return self.sessions.set_states(df)

    def release_sessions(self, df: DataFrame) -> None:
        """Release the session locks a ``receive_sessions_dataframe`` result holds."""
        sessions = self.sessions
        sessions.release_all(sessions.locks_of(df))

    def none(self) -> DataFrame:
        return self.messages().limit(0).drop("sub_queue")

    # -- settle ----------------------------------------------------------------------------
    def settle(self, locks: list[tuple[int, str]], kind: str, reason: str | None = None,
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
            self._check_settle(kind, [])
            return SettleResult()
        lanes = (Lane.MAIN, Lane.DEFERRED) if self.lane == Lane.MAIN else (self.lane,)
        partitions = sorted({partition_of(seq) for seq, _ in locks})
        self._check_settle(kind, partitions)
        if kind == "complete" and len(locks) == 1 and held_until is not None \
                and not deferred and self.records_allowed:  # a client's lock: never a range
            done = self._completes().submit((*locks[0], held_until))
            if done is not None:
                return done

        ranged, whole = self._settle_ranges(spans_of(locks), kind)
        locks = [(seq, token) for seq, token in locks if (partition_of(seq), token) not in whole]
        if not locks:
            return ranged

        def attempt() -> SettleResult:
            now = utcnow()
            ctx = SettleContext(
                now=now, kind=kind, max_delivery_count=self.props.max_delivery_count,
                renewed_until=lock_stamp(now, self.props.lock_duration, 0.0),
                reason=reason, description=description)
            return settle_once(self.ledger, locks, lanes, ctx)

        with self.board.hold(partitions):
            result = retry_conflicts(attempt, what=f"{kind} on {self.name} {partitions}")
        return replace(result, settled=result.settled + ranged.settled)

    def _check_settle(self, kind: str, partitions: list[int]) -> None:
        """Refuse a settlement this entity cannot make, before anything is changed."""
        if kind not in SETTLE_KINDS:
            raise InvalidOperationError(f"unknown settlement {kind!r}")
        if kind == "dead_letter" and self.sub_queue.is_dead_letter:
            raise InvalidOperationError(
                f"{self.name}/{self.sub_queue.view_name}: a dead-lettered message cannot "
                "be dead-lettered again (S7.2)")
        if partitions:
            self.check_status("receive")
            self.require_available(partitions, kind)

    def _completes(self) -> Group[tuple[int, str, datetime], SettleResult | None]:
        """The process's group commit of completion records for this entity's lane."""
        ledger, lane = self.ledger, self.lane
        return group_for(("complete", ledger.path, lane), lambda: Group(
            lambda locks: complete_by_records(ledger, locks, lane), COMPLETE_GROUP))

    @property
    def records_allowed(self) -> bool:
        """Whether a complete may be a completion record (decision 011): in the main queue
        (other lanes are re-locked by paths that do not read records; a session's renewal
        and release fold its records, ``Sessions._move_message_locks``), on a ledger at
        Serializable isolation (ledgers created before it keep keyed deletes). Read once."""
        if self._records is None:
            self._records = (self.lane == Lane.MAIN
                             and self.ledger.isolation_level() == "Serializable")
        return self._records

    def settle_dataframe(self, batch: DataFrame, kind: str, reason: str | None = None,
                         description: str | None = None) -> SettleResult:
        """Settle the rows of ``batch`` whose locks are valid; report the others."""
        ranged, done = SettleResult(), set[tuple[int, str]]()
        if self._may_range() and may_hold_windows(self.ledger, (Lane.MAIN,)):
            spans = stated_spans(batch) or frame_spans(batch)
            self._check_settle(kind, sorted({p for p, _ in spans}))
            ranged, done = self._settle_ranges(spans, kind)
            if done and done >= spans.keys():
                return ranged  # every row was in a range settled whole
        pairs = (batch.where(~ranges_in(done)) if done else batch).select(
            "sequence_number", "lock_token").collect()
        result = self.settle([(int(r[0]), r[1]) for r in pairs], kind, reason, description)
        return replace(result, settled=result.settled + ranged.settled)

    def materialize_ranges(self, locks: list[tuple[int, str]]) -> None:
        """Turn the range locks (decision 018) ``locks`` touch into message rows, so that a
        path reading messages by sequence number (a transaction) finds them."""
        self._settle_ranges(spans_of(locks), "materialize")

    def _may_range(self) -> bool:
        """Whether this entity's settlements may touch range locks (decision 018): in the
        main queue, whichever executor took them."""
        return self.lane == Lane.MAIN

    def _settle_ranges(self, asked: dict[tuple[int, str], Span], kind: str
                       ) -> tuple[SettleResult, set[tuple[int, str]]]:
        """``receive_range.settle_ranges`` of the keys whose token is a range lock's
        (``core.tokens``), under the partitions' hold, retried on conflicts."""
        asked = {key: span for key, span in asked.items() if is_range_token(key[1])}
        if not asked or not self._may_range():
            return SettleResult(), set()
        partitions = sorted({p for p, _ in asked})
        with self.board.hold(partitions):
            return retry_conflicts(lambda: settle_ranges(self, asked, kind, utcnow()),
                                   what=f"{kind} of range locks on {self.name}")

    def complete_dataframe(self, batch: DataFrame) -> SettleResult:
        return self.settle_dataframe(batch, "complete")

    def abandon_dataframe(self, batch: DataFrame) -> SettleResult:
        return self.settle_dataframe(batch, "abandon")

    def defer_dataframe(self, batch: DataFrame) -> SettleResult:
        return self.settle_dataframe(batch, "defer")

    def dead_letter_dataframe(self, batch: DataFrame, reason: str | None = None,
                              error_description: str | None = None) -> SettleResult:
        check_dead_letter_text(reason, error_description)
        return self.settle_dataframe(batch, "dead_letter", reason, error_description)

    def receive_deferred(self, sequence_numbers: list[int], mode: str = "peek_lock"
                         ) -> DataFrame:
        """The deferred messages with these numbers, locked (or taken in receive-and-delete
        mode), with bodies; MessageNotFound if one is unknown or locked by another (S6.3)."""
        self.check_status("receive")
        if not sequence_numbers:
            return self.none()
        return with_bodies(self.inbox, self._receive_deferred(sequence_numbers, mode))

    def receive_deferred_rows(self, sequence_numbers: list[int], mode: str = "peek_lock"
                              ) -> list[Row]:
        """``receive_deferred`` as rows, by sequence number: no Spark job where the local
        executor decided it (the client's call)."""
        self.check_status("receive")
        if not sequence_numbers:
            return []
        rows = collected(self.inbox, self._receive_deferred(sequence_numbers, mode))
        return sorted(rows, key=lambda r: int(r["sequence_number"]))

    def _receive_deferred(self, sequence_numbers: list[int], mode: str) -> ReceiveResult:
        lane = Lane.DEFERRED if self.lane == Lane.MAIN else self.lane
        ctx, seqs = self._context(mode == "peek_lock"), sorted(set(sequence_numbers))
        try:
            applied = self._all_by_sequence(
                seqs, (lane,), lambda now: deferred_valid(now, ctx.main_queue),
                deferred_outcome(ctx), "receive deferred",
                "(unknown, not deferred, expired, or locked by another receiver; S6.3, S8.2)")
        except MessageNotFoundError as exc:
            self._expire_deferred(seqs, lane, ctx, exc)
            raise
        assert applied.changes is not None
        return ReceiveResult(
            handed=applied.changes, locators=applied.locators, count=len(applied.valid),
            left={}, committed=True,
            locked_until=min(ctx.locked_until, utcnow() + self.props.lock_duration)
            if mode == "peek_lock" else None,
            messages=None if applied.rows is None else messages_here(self.inbox, applied.rows))

    def _expire_deferred(self, seqs: list[int], lane: str, ctx: ReceiveContext,
                         refused: MessageNotFoundError) -> None:
        """After a refused ``receive_deferred``: those of ``seqs`` that are deferred and
        expired leave as expiry says (S8.2: a deferred message expires when asked for), in
        one commit, and the refusal names them."""
        partitions = sorted({partition_of(seq) for seq in seqs})

        def attempt() -> Applied:
            return apply_by_sequence(
                self.ledger, [(s, None) for s in seqs], (lane,),
                deferred_expired(utcnow(), ctx.main_queue),
                expiry_outcome(ctx.dead_letter_on_expiry))

        with self.board.hold(partitions):
            expired = retry_conflicts(attempt, what=f"expire deferred on {self.name}").valid
        if expired:
            went = ("moved to the dead-letter queue" if ctx.dead_letter_on_expiry
                    else "dropped")
            raise MessageNotFoundError(
                f"receive deferred in {self.path}: sequence number(s) {expired} expired "
                f"(S8.2) and were {went}; no message was received") from refused

    def sequence_numbers(self, send_id: str) -> list[int]:
        """The sequence numbers of the messages one send stored, in batch-index order: send
        order for a send made ``in_send_order`` (the client's and a transaction's, S3.4),
        grouped by partition for another DataFrame send. From the heads of its partitions
        (``engine.numbers``), else from the view."""
        if self.dedupe is None and self.target is None:
            found = send_numbers(self.inbox, self.ledger, send_id)
            if found is not None:
                return found
        rows = (self.messages(internal=True).where(F.col("_send_id") == send_id)
                .orderBy("_batch_index").select("sequence_number").collect())
        return [int(r[0]) for r in rows]

    def cancel_scheduled(self, sequence_numbers: list[int]) -> None:
        """Remove scheduled messages not yet active; MessageNotFound for any other (S8.4).
        One commit decided on the driver when it can be (``receive_small.cancel``: the
        cursor passes the messages without storing them, ledger rows are deleted); else
        the cursor first passes them (a receive that hands out nothing), then their ledger
        rows are deleted."""
        self.check_status("send")
        seqs = sorted(set(sequence_numbers))
        if not seqs:
            return
        self.require_available(sorted({partition_of(seq) for seq in seqs}), "cancel")
        if self._cancel_at_once(seqs):
            return
        self._pass_to(seqs)
        self._all_by_sequence(seqs, (Lane.SCHEDULED, Lane.MAIN), cancel_valid, cancel_outcome(),
                              "cancel", "(unknown, cancelled or already active; S8.4)")

    def delete_messages(self, max_messages: int, before: datetime,
                        session_id: str | None = None) -> int:
        """Batch delete (S5.7): up to ``max_messages`` active, unlocked messages of this
        sub-queue (of ``session_id``) enqueued before ``before``, oldest first, in one
        commit; how many were removed. One locked meanwhile is left and not counted."""
        self.check_status("receive")
        now = utcnow()
        view = self.messages().where(
            (F.col("sub_queue") == self.sub_queue.view_name) & (F.col("state") == "Active")
            & (F.col("locked_until_utc").isNull() | (F.col("locked_until_utc") <= F.lit(now)))
            & (F.col("enqueued_time_utc") < F.lit(before)))
        if session_id is not None:
            view = view.where(F.col("session_id") == session_id)
        seqs = [int(r[0]) for r in view.orderBy("enqueued_time_utc", "sequence_number")
                .limit(max_messages).select("sequence_number").collect()]
        if not seqs:
            return 0
        if self.lane == Lane.MAIN:
            self._pass_to(seqs)  # messages the cursors have not passed get ledger rows
            materialize_lapsed(self, sorted({partition_of(s) for s in seqs}), now)
        partitions = sorted({partition_of(seq) for seq in seqs})
        self.require_available(partitions, "delete")
        with self.board.hold(partitions):
            applied = retry_conflicts(lambda: apply_by_sequence(
                self.ledger, [(s, None) for s in seqs], (self.lane,),
                delete_valid(utcnow(), before), delete_outcome()),
                what=f"delete on {self.name} {partitions}")
        return len(applied.valid)

    def _all_by_sequence(self, seqs: list[int], lanes: tuple[str, ...],
                         valid: Callable[[datetime], Expr], outcome: Outcome, what: str,
                         why: str) -> Applied:
        """Apply ``outcome`` to every one of ``seqs`` in one commit, or to none of them and
        raise MessageNotFound naming those that are not valid."""
        partitions = sorted({partition_of(seq) for seq in seqs})
        self.require_available(partitions, what)

        def attempt() -> Applied:
            return apply_by_sequence(self.ledger, [(s, None) for s in seqs],
                                     lanes, valid(utcnow()), outcome, require_all=True)

        with self.board.hold(partitions):
            applied = retry_conflicts(attempt, what=f"{what} on {self.name} {partitions}")
        absent = sorted({*applied.missing, *applied.invalid})
        if absent:
            raise MessageNotFoundError(
                f"{what} in {self.path}: no message with sequence number(s) {absent} {why}; "
                "nothing was changed")
        return applied

    def _cancel_at_once(self, seqs: list[int]) -> bool:
        """``cancel_scheduled`` in one commit, or False (nothing done) when the driver
        cannot decide it."""
        if self.lane != Lane.MAIN or self.dedupe is not None:
            return False
        targets: dict[int, int] = {}
        for seq in seqs:
            targets[partition_of(seq)] = max(targets.get(partition_of(seq), 0), seq)
        partitions = sorted(targets)

        def attempt() -> bool:
            a = replace(self.make_attempt(partitions, 0, 0, True,
                                          pass_to=tuple(sorted(targets.items()))),
                        cancel=tuple(seqs))
            return cancel(self.ledger, self.inbox, a)

        try:
            with self.board.hold(partitions):
                return retry_conflicts(attempt, what=f"cancel on {self.name} {partitions}")
        except NotCancellable as exc:
            raise MessageNotFoundError(
                f"cancel in {self.path}: no message with sequence number(s) {exc.seqs} "
                "(unknown, cancelled or already active; S8.4); nothing was changed") from None

    def _pass_to(self, seqs: list[int]) -> None:
        """Move each partition's cursor past the highest of ``seqs`` in it (bounded steps)."""
        targets: dict[int, int] = {}
        for seq in seqs:
            targets[partition_of(seq)] = max(targets.get(partition_of(seq), 0), seq)
        for _ in range(64):
            counters = self.ledger.counters()
            behind = {p: seq for p, seq in targets.items()
                      if counters.get(p, 0) < counter_of(seq)}
            if not behind:
                return
            attempt = self.make_attempt(sorted(behind), 0, 0, True,
                                         pass_to=tuple(sorted(behind.items())))
            with self.board.hold(sorted(behind)):
                retry_conflicts(lambda a=attempt: receive(  # type: ignore[misc]
                    self.ledger, self.inbox, a, Lane.MAIN),
                    what=f"pass the cursors of {self.name}")

    # -- reads: never commit ---------------------------------------------------------------
    def messages(self, internal: bool = False) -> DataFrame:
        """Every message of the entity (all sub-queues), as its Spark SQL view shows it;
        ``internal`` adds each message's ``_send_id`` and ``_batch_index``."""
        return messages(self.inbox, self.ledger, internal, self.dedupe, self.target)

    def version(self) -> int:
        """The entity's latest version: its inbox's (one per send commit), what ``as_of``
        and ``replay`` take."""
        return self.inbox.version()

    def as_of(self, when: int | datetime) -> DataFrame:
        """The messages as the view showed them at ``when``: a version of the entity (one
        of its inbox's, a send commit) or a time. Delta time travel (``engine.replay``)."""
        from sbqueue.engine.replay import as_of

        return as_of(self, when)

    def replay(self, when: int | datetime, destination: str, where: str | None = None
               ) -> SendResult:
        """Send what the entity held at ``when`` (matching ``where``) to ``destination``
        again, in one commit (``engine.replay.replay``)."""
        from sbqueue.engine.replay import replay

        return replay(self, when, destination, where)

    def peek_dataframe(self, max_messages: int = 1000, from_sequence: int | None = None,
                       after: tuple[datetime, int] | None = None,
                       session_id: str | None = None) -> DataFrame:
        """Messages in enqueued-time then sequence order; no lock, no change, no commit
        (S9.1-S9.3). The main queue shows Active, Deferred and Scheduled messages.
        ``from_sequence``: from that number on, within its partition (S9.3); ``after``:
        strictly after that (enqueued time, sequence number), to continue a peek (S9.1);
        ``session_id``: that session's messages only (a session receiver's peek)."""
        view = self.messages().where(F.col("sub_queue") == self.sub_queue.view_name)
        if session_id is not None:
            view = view.where(F.col("session_id") == session_id)
        seq, time_ = F.col("sequence_number"), F.col("enqueued_time_utc")
        if from_sequence is not None:
            view = view.where((F.col("partition_id") == partition_of(from_sequence))
                              & (seq >= from_sequence))
        if after is not None:
            at = F.lit(after[0]).cast("timestamp")
            view = view.where((time_ > at) | ((time_ == at) & (seq > after[1])))
        return view.orderBy("enqueued_time_utc", "sequence_number").limit(max_messages)

    def peek_rows(self, max_messages: int = 1000, from_sequence: int | None = None,
                  after: tuple[datetime, int] | None = None,
                  session_id: str | None = None) -> list[Row]:
        """``peek_dataframe`` collected (the client's peek): read on the driver where it
        can be (``engine.peek_here``, no Spark job), else through the view."""
        if after is not None:  # a naive time is UTC on both paths (Spark would read local)
            after = (as_utc(after[0]), after[1])
        if self.dedupe is None:  # the view drops duplicates: Spark decides which
            here = peek_here(self.inbox, self.ledger, self.partitions, self.target, utcnow(),
                             self.sub_queue.view_name, max_messages, from_sequence, after,
                             session_id)
            if here is not None:
                return here
        return self.peek_dataframe(max_messages, from_sequence, after, session_id).collect()

    def counts(self) -> dict[str, int]:
        """Message counts by kind, summed over partitions, and ``size_in_bytes`` (S16.2):
        read on the driver where it can be (``engine.tally``), else through the view."""
        forwarding = bool(self.props.forward_to)
        held = self._held_here()
        if held is None:
            return count_messages(self.messages(), forwarding)
        return tally(((h[1], h[2], 1, h[3]) for h in held), forwarding)

    def _held_here(self) -> list[Held] | None:
        if self.dedupe is not None:  # the view drops duplicates: Spark decides which
            return None
        return held_here(self.inbox, self.ledger, self.partitions, self.target, utcnow())

    def accessed_at(self) -> datetime | None:
        """When a message was last sent, received or settled (S16.2)."""
        return last_commit([self.inbox, self.ledger])

    def partition_counts(self) -> dict[int, int]:
        """Messages per partition (all states and sub-queues)."""
        held = self._held_here()
        if held is not None:
            return per_partition(held, self.partitions)
        rows = self.messages().groupBy("partition_id").count().collect()
        return {p: 0 for p in range(self.partitions)} | {r[0]: r[1] for r in rows}


def _receive_together(asks: list[tuple[Entity, int]], mode: str) -> list[list[Row]]:
    """The receives of several callers as one (the first caller's entity object): each
    gets, in turn, up to what it asked of the messages handed out."""
    rows = asks[0][0]._receive_rows(sum(n for _, n in asks), mode)
    out, start = [], 0
    for _, n in asks:
        out.append(rows[start:start + n])
        start += n
    return out
