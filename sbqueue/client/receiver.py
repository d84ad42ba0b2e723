"""``ServiceBusReceiver``: receive, peek and settle one message at a time (S5-S7, S9).

A receive asks the engine for ``max(max_message_count, prefetch_count)`` messages in one
commit, returns ``max_message_count`` and keeps the rest in a prefetch cache whose locks
are already running (S5.5); without prefetch it never locks a message it does not return
(S5.4). In receive-and-delete mode nothing is prefetched: a cached message is already
gone from the entity and would be lost with the receiver. Settlements are one commit each,
on the message's partition only. A session receiver (S10) holds its session from when it
opens to when it closes; it receives that session's messages in sequence order, and their
locks are the session's.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sbqueue.client.convert import to_received, utc
from sbqueue.client.enums import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusMessageState,
    ServiceBusReceiveMode,
)
from sbqueue.client.message import ServiceBusReceivedMessage
from sbqueue.client.observe import observed, timed
from sbqueue.client.session import ServiceBusSession
from sbqueue.core.clock import utcnow
from sbqueue.core.keywords import OPERATION, accept, honours_timeout
from sbqueue.core.sizes import check_dead_letter_text
from sbqueue.engine.entity import Entity
from sbqueue.exceptions import (
    InvalidOperationError,
    MessageAlreadySettled,
    MessageLockLostError,
    SessionLockLostError,
)

if TYPE_CHECKING:
    from sbqueue.client.lock_renewer import AutoLockRenewer
    from sbqueue.store.watch import Watch

__all__ = ["ServiceBusReceiver"]

MAX_PEEK = 250  # S9.3
MAX_DELETE = 4000  # S5.7: messages one batch delete removes at most
# First and longest pause between empty looks where the entity's logs are not watched (the
# Spark executor): an idle receiver looks at most twice a second, and a message sent to it
# waits at most half a second for the next look.
_IDLE_SLEEP = (0.05, 0.5)
# Where they are watched (``store.watch``), a waiting receiver looks again as soon as a
# commit lands, and at least this often: time alone makes messages available too (a
# scheduled time reached, a lock run out). Decision 045: a look costs ~25 ms warm.
_LOOK_EVERY = 3.0


class ServiceBusReceiver:
    """Receives from one queue or sub-queue. Use one receiver per thread, as in the SDK."""

    def __init__(self, entity: Entity, *, receive_mode: ServiceBusReceiveMode,
                 max_wait_time: float | None = None, prefetch_count: int = 0,
                 session_id: object = None,
                 auto_lock_renewer: AutoLockRenewer | None = None) -> None:
        if prefetch_count < 0:
            raise InvalidOperationError(f"prefetch_count is {prefetch_count}; at least 0")
        self._entity = entity
        self.entity_path = entity.path
        self.receive_mode = receive_mode
        self._max_wait_time = max_wait_time
        self._prefetch_count = prefetch_count
        self._cache: deque[ServiceBusReceivedMessage] = deque()
        self._last_peeked: tuple[datetime, int] | None = None
        self._lock = threading.Lock()
        self._session_id = session_id
        self._session: ServiceBusSession | None = None
        self._renewer = auto_lock_renewer
        self._watch = entity.watch()  # None: the Spark executor, pauses without one

    @property
    def session(self) -> ServiceBusSession | None:
        """The session this receiver holds (locked when first needed); None for a receiver
        of a queue without sessions."""
        if self._session_id is None:
            return None
        if self._session is None:
            sessions = self._entity.sessions
            if self._session_id is NEXT_AVAILABLE_SESSION:
                lock = sessions.lock_next(self._max_wait_time or 0.0)
            else:
                lock = sessions.lock(str(self._session_id))
            self._session = ServiceBusSession(sessions, lock)
            if self._renewer is not None:
                self._renewer.register(self, self._session)
        return self._session

    @property
    def _prefetch(self) -> int:
        """Prefetch only under peek-lock: a prefetched received-and-deleted message would be
        lost with the receiver (nothing is ever lost), so that mode takes what it returns."""
        return self._prefetch_count if self.receive_mode == ServiceBusReceiveMode.PEEK_LOCK \
            else 0

    @property
    def lock_duration(self) -> timedelta:
        """How long a lock taken by this receiver lasts (the entity's lock_duration)."""
        return self._entity.props.lock_duration

    # -- receive ---------------------------------------------------------------------------
    @property
    def _mode(self) -> str:
        return ("peek_lock" if self.receive_mode == ServiceBusReceiveMode.PEEK_LOCK
                else "receive_and_delete")

    def _take_cached(self, count: int) -> list[ServiceBusReceivedMessage]:
        """Cached messages whose locks still hold (a received-and-deleted one always)."""
        now = utcnow()
        out: list[ServiceBusReceivedMessage] = []
        while self._cache and len(out) < count:
            message = self._cache.popleft()
            if message.locked_until_utc is None or message.locked_until_utc > now:
                out.append(message)
        return out

    @timed("receive")
    def _fetch(self, count: int) -> list[ServiceBusReceivedMessage]:
        session = self.session
        if session is None:
            rows = self._entity.receive_rows(count, self._mode)
        else:
            session.check_held()
            rows = self._entity.sessions.receive_rows([session.lock], count, self._mode)
        messages = sorted((to_received(r) for r in rows),
                          key=lambda m: (m.partition_id, m.sequence_number))
        if self.receive_mode == ServiceBusReceiveMode.RECEIVE_AND_DELETE:
            for message in messages:
                message.settled = True
        elif self._renewer is not None and self._session_id is None:
            for message in messages:  # a session's messages move with the session's lock
                self._renewer.register(self, message)
        return messages

    def receive_messages(self, max_message_count: int | None = 1,
                         max_wait_time: float | None = None) -> list[ServiceBusReceivedMessage]:
        """Between 0 and ``max_message_count`` messages: as soon as there are any, else
        ``[]`` once ``max_wait_time`` seconds passed (S5.4)."""
        count = 1 if max_message_count is None else max_message_count
        if count < 1:
            raise InvalidOperationError(f"max_message_count is {count}; at least 1 (S5.4)")
        wait = self._max_wait_time if max_wait_time is None else max_wait_time
        return self._receive(count, time.monotonic() + (wait or 0.0))

    def _receive(self, count: int, deadline: float) -> list[ServiceBusReceivedMessage]:
        """Look, and while nothing is there pause and look again until ``deadline``
        (``math.inf``: until a message comes). Each pause doubles up to the longest, so an
        idle receiver costs little, yet a new message waits at most that long."""
        pause = _IDLE_SLEEP[0]
        with self._lock:
            while True:
                if self._watch is not None:
                    self._watch.mark()  # before the look: a commit during it wakes the wait
                out = self._take_cached(count)
                need = count - len(out)
                if need:
                    fetched = self._fetch(max(need, self._prefetch))
                    out += fetched[:need]
                    self._cache.extend(fetched[need:])
                if out or time.monotonic() >= deadline:
                    return out
                if self._watch is not None:
                    self._wait(self._watch, deadline)
                    continue
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, _IDLE_SLEEP[1])

    @staticmethod
    def _wait(watch: Watch, deadline: float) -> None:
        """Pause until a commit lands on the entity's tables, the next full look is due
        (``_LOOK_EVERY``) or ``deadline``, looking for the commit every ``watch.tick``."""
        until = min(deadline, time.monotonic() + _LOOK_EVERY)
        while (left := until - time.monotonic()) > 0:
            time.sleep(min(watch.tick, left))
            if watch.moved():
                return

    def __iter__(self) -> Iterator[ServiceBusReceivedMessage]:
        """Messages one by one; stops after ``max_wait_time`` idle when it is set, else waits
        for the next message however long, pausing between looks (never spinning)."""
        while True:
            if self._max_wait_time is None:
                got = self._receive(1, math.inf)
            else:
                got = self.receive_messages(1, self._max_wait_time)
            if not got:
                return
            yield got[0]

    # -- peek ------------------------------------------------------------------------------
    @timed("peek")
    def peek_messages(self, max_message_count: int = 1, *, sequence_number: int | None = None,
                      **kwargs: Any) -> list[ServiceBusReceivedMessage]:
        """No lock, no change, no commit (S9.1); continues after the last peeked message."""
        accept("peek_messages", kwargs, OPERATION)
        count = min(max(1, max_message_count), MAX_PEEK)
        session = self.session.session_id if self.session is not None else None
        if sequence_number is not None:
            rows = self._entity.peek_rows(count, from_sequence=sequence_number,
                                          session_id=session)
        else:
            rows = self._entity.peek_rows(count, after=self._last_peeked, session_id=session)
        messages = [to_received(r) for r in rows]
        if messages and messages[-1].enqueued_time_utc is not None:
            self._last_peeked = (messages[-1].enqueued_time_utc, messages[-1].sequence_number)
        return messages

    # -- batch delete (S5.7) ---------------------------------------------------------------
    @timed("delete")
    @honours_timeout
    def delete_messages(self, *, max_message_count: int = 1,
                        before_enqueued_time_utc: datetime | None = None,
                        **kwargs: Any) -> int:
        """Remove up to ``max_message_count`` (at most 4,000) unlocked active messages
        enqueued before ``before_enqueued_time_utc`` (now when None), oldest first, without
        receiving them; how many were removed (S5.7)."""
        accept("delete_messages", kwargs, OPERATION)
        if isinstance(max_message_count, bool) or not isinstance(max_message_count, int) or not (
                1 <= max_message_count <= MAX_DELETE):
            raise ValueError(f"max_message_count must be 1 to {MAX_DELETE}, got "
                             f"{max_message_count!r} (S5.7)")
        before = utc(before_enqueued_time_utc) or utcnow()
        session = self.session.session_id if self.session is not None else None
        return self._entity.delete_messages(max_message_count, before, session)

    @honours_timeout
    def purge_messages(self, *, before_enqueued_time_utc: datetime | None = None,
                       **kwargs: Any) -> int:
        """Remove every unlocked active message enqueued before ``before_enqueued_time_utc``
        (now when None), in batches of 4,000; how many were removed (S5.7)."""
        accept("purge_messages", kwargs, OPERATION)
        before = utc(before_enqueued_time_utc) or utcnow()
        total = 0
        while removed := self.delete_messages(max_message_count=MAX_DELETE,
                                              before_enqueued_time_utc=before):
            total += removed
        return total

    # -- settle ----------------------------------------------------------------------------
    def check_settleable(self, message: ServiceBusReceivedMessage, kind: str) -> str:
        """The checks a settlement makes before it commits anything (S5.1, S6.6, S10.3);
        a transaction makes them as each settlement is added. The message's lock token."""
        if not isinstance(message, ServiceBusReceivedMessage):
            raise InvalidOperationError(
                f"{kind} takes a received message, not {type(message).__name__}")
        if self.receive_mode == ServiceBusReceiveMode.RECEIVE_AND_DELETE:
            raise ValueError(f"message {message.sequence_number} was received and deleted; "
                             f"it cannot be settled ({kind}, S5.1)")
        if message.settled:
            raise MessageAlreadySettled(
                f"message {message.sequence_number} was settled already (S6.6)")
        if message.lock_token is None:
            raise InvalidOperationError(
                f"message {message.sequence_number} was peeked, not received under a lock")
        if self._session is not None:  # a session message's lock is its session's (S10.3)
            self._session.check_held()
        else:
            now = utcnow()
            expired = message.locked_until_utc is not None and message.locked_until_utc <= now
            if expired:  # as the SDK does: the holder was told the lock ends then (S6.6)
                raise MessageLockLostError(
                    f"the lock on message {message.sequence_number} expired at "
                    f"{message.locked_until_utc} (S6.6)")
        return message.lock_token

    @property
    def entity(self) -> Entity:
        return self._entity

    @property
    def holds_session(self) -> bool:
        return self._session is not None

    def _settle(self, message: ServiceBusReceivedMessage, kind: str,
                reason: str | None = None, description: str | None = None) -> datetime | None:
        with observed(kind, self._entity.path):
            return self._settle_one(message, kind, reason, description)

    def _settle_one(self, message: ServiceBusReceivedMessage, kind: str,
                    reason: str | None, description: str | None) -> datetime | None:
        if kind == "renew" and self._session_id is not None:
            raise TypeError("session messages cannot be renewed one by one: renew the "
                            "session lock (receiver.session.renew_lock(), S10.3)")
        token = self.check_settleable(message, kind)
        session = self._session
        held_until = message.locked_until_utc
        if session is not None and held_until is not None:
            # A session message's lock is its session's (S10.3), but a receive that raced
            # a renewal stamped the end it read: the earlier of the two is sure to hold.
            held_until = min(held_until, session.locked_until_utc)
        with session.settling() if session is not None else contextlib.nullcontext():
            result = self._entity.settle(
                [(message.sequence_number, token)], kind, reason, description,
                held_until=held_until, deferred=message.state == ServiceBusMessageState.DEFERRED)
        if result.lock_lost and self._session is not None:
            raise SessionLockLostError(
                f"the lock on session {self._session.session_id!r} is no longer held (S10.3)")
        if result.lock_lost:
            raise MessageLockLostError(
                f"the lock on message {message.sequence_number} is no longer valid: it "
                "expired or another receiver holds the message now (S6.6)")
        if result.already_settled:
            message.settled = True
            raise MessageAlreadySettled(
                f"message {message.sequence_number} was settled already (S6.6)")
        if kind == "renew":
            message.locked_until_utc = result.locked_until
        else:
            message.settled = True
        return result.locked_until

    def complete_message(self, message: ServiceBusReceivedMessage) -> None:
        """Remove the message for good (S6.1)."""
        self._settle(message, "complete")

    def abandon_message(self, message: ServiceBusReceivedMessage) -> None:
        """Release the lock at once; the message is available again (S6.2)."""
        self._settle(message, "abandon")

    def defer_message(self, message: ServiceBusReceivedMessage) -> None:
        """Set it aside; only ``receive_deferred_messages`` returns it (S6.3)."""
        self._settle(message, "defer")

    def dead_letter_message(self, message: ServiceBusReceivedMessage,
                            reason: str | None = None,
                            error_description: str | None = None) -> None:
        """Move it to the dead-letter queue with this reason and description (S6.4)."""
        check_dead_letter_text(reason, error_description)
        self._settle(message, "dead_letter", reason, error_description)

    @honours_timeout
    def renew_message_lock(self, message: ServiceBusReceivedMessage, **kwargs: Any
                           ) -> datetime:
        """Extend the lock to now + lock duration; the new locked-until time (S6.5)."""
        accept("renew_message_lock", kwargs, OPERATION)
        until = self._settle(message, "renew")
        assert until is not None
        return until

    def renew_message_locks(self, messages: Sequence[ServiceBusReceivedMessage]
                            ) -> dict[int, Exception]:
        """Renew several message locks in one commit (``AutoLockRenewer`` gathers its due
        locks so, issue 18); the renewed ones get their new ``locked_until_utc``. Returns,
        by ``id`` of each message that was not renewed, why (S6.5, S6.6)."""
        failed: dict[int, Exception] = {}
        held: list[tuple[ServiceBusReceivedMessage, str]] = []
        for message in messages:
            try:
                if self._session_id is not None:
                    raise TypeError("session messages are renewed with their session (S10.3)")
                held.append((message, self.check_settleable(message, "renew")))
            except Exception as exc:  # reported per message, as one renewal would raise
                failed[id(message)] = exc
        if not held:
            return failed
        result = self._entity.settle([(m.sequence_number, t) for m, t in held], "renew")
        for message, _ in held:
            if message.sequence_number in result.lock_lost:
                failed[id(message)] = MessageLockLostError(
                    f"the lock on message {message.sequence_number} is no longer valid (S6.6)")
            elif message.sequence_number in result.already_settled:
                failed[id(message)] = MessageAlreadySettled(
                    f"message {message.sequence_number} was settled already (S6.6)")
            else:
                message.locked_until_utc = result.locked_until
        return failed

    @timed("receive_deferred")
    @honours_timeout
    def receive_deferred_messages(self, sequence_numbers: int | Sequence[int], **kwargs: Any
                                  ) -> list[ServiceBusReceivedMessage]:
        """The deferred messages with these numbers, locked, state still Deferred (S6.3)."""
        accept("receive_deferred_messages", kwargs, OPERATION)
        seqs = [sequence_numbers] if isinstance(sequence_numbers, int) else list(
            sequence_numbers)
        messages = [to_received(r) for r in self._entity.receive_deferred_rows(seqs, self._mode)]
        if self.receive_mode == ServiceBusReceiveMode.RECEIVE_AND_DELETE:
            for message in messages:
                message.settled = True
        elif self._renewer is not None and self._session_id is None:
            for message in messages:  # a session's messages move with the session's lock
                self._renewer.register(self, message)
        return messages

    # -- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        """Prefetched messages keep their locks until they expire, as in the SDK; they are
        then delivered again. A session receiver releases its session (S10.3)."""
        self._cache.clear()
        if self._session is not None:
            self._session.release()

    def __enter__(self) -> ServiceBusReceiver:
        _ = self.session  # a session receiver takes its session lock when it opens
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
