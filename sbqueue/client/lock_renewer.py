"""``AutoLockRenewer``: keeps message and session locks alive while their holder works
(S6.5, S10.3).

As in azure-servicebus: ``register(receiver, message_or_session,
max_lock_renewal_duration=...)``; a background thread renews each lock shortly before it
expires, until the message is settled (the session released), the renewal duration is
over, or a renewal fails (then ``on_lock_renew_failure`` is called with the message or
session and an ``AutoLockRenewFailed`` carrying the cause, also left in the target's
``auto_renew_error``). When the duration is over, the target's ``auto_renew_error`` is an
``AutoLockRenewTimeout``; the callback hears of it only if the lock had already expired.

A renewal is a Delta commit of seconds, so the renewer gathers: when one message lock of
a receiver is due, every registered lock of that receiver due within the next round is
renewed with it, in one commit (issue 18). A lock is due when half of it is left, or three
times the longest of the last renewal commits this renewer measured, whichever is more:
one slow commit (a cold JVM, a busy machine) must not outlast the locks waiting for it.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from types import TracebackType
from typing import Protocol

from sbqueue.client.message import ServiceBusReceivedMessage
from sbqueue.client.session import ServiceBusSession
from sbqueue.core.clock import utcnow
from sbqueue.exceptions import (
    AutoLockRenewFailed,
    AutoLockRenewTimeout,
    InvalidOperationError,
    StorageConflictError,
)

__all__ = ["AutoLockRenewer"]

log = logging.getLogger("sbqueue.client")

_TICK = 0.25
_EXIT_WAIT = 30.0  # seconds an exiting interpreter waits for a renewal under way

Renewable = ServiceBusReceivedMessage | ServiceBusSession
FailureCallback = Callable[[Renewable, Exception | None], None]


class Renewing(Protocol):
    """What the renewer asks of a receiver (``ServiceBusReceiver`` is one): its lock length
    and its two renewals. A protocol, so the receiver may name this module and not the other
    way round."""

    @property
    def lock_duration(self) -> timedelta: ...

    def renew_message_lock(self, message: ServiceBusReceivedMessage) -> datetime: ...

    def renew_message_locks(self, messages: Sequence[ServiceBusReceivedMessage]
                            ) -> dict[int, Exception]: ...


@dataclass
class _Entry:
    receiver: Renewing
    target: Renewable
    until: float  # monotonic time after which renewal stops
    on_failure: FailureCallback | None
    lock: timedelta  # the receiver's lock duration
    duration: float  # max_lock_renewal_duration, seconds

    @property
    def done(self) -> bool:
        """Settled or released: nothing left to renew."""
        if isinstance(self.target, ServiceBusSession):
            return self.target.released
        return self.target.settled

    @property
    def locked_until(self) -> datetime | None:
        return self.target.locked_until_utc

    def renew(self) -> None:
        if isinstance(self.target, ServiceBusSession):
            self.target.renew_lock()
        else:
            self.receiver.renew_message_lock(self.target)


class AutoLockRenewer:
    """Renews the locks of registered messages from one background thread."""

    def __init__(self, max_lock_renewal_duration: float = 300,
                 on_lock_renew_failure: FailureCallback | None = None,
                 executor: object = None, max_workers: int | None = None) -> None:
        """``executor`` and ``max_workers`` size the SDK's thread pool; accepted and not
        used: one thread renews every due lock of a receiver in one commit."""
        self._duration = max_lock_renewal_duration
        self._on_failure = on_lock_renew_failure
        self._entries: list[_Entry] = []
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._commit_seconds: list[float] = []  # the last renewal commits' durations

    def register(self, receiver: Renewing, renewable: Renewable,
                 max_lock_renewal_duration: float | None = None,
                 on_lock_renew_failure: FailureCallback | None = None) -> None:
        """Keep ``renewable``'s lock alive for up to ``max_lock_renewal_duration`` seconds:
        a message received in peek-lock mode, or a receiver's session."""
        message = isinstance(renewable, ServiceBusReceivedMessage)
        if not (isinstance(renewable, ServiceBusSession)
                or (message and renewable.lock_token is not None)):
            raise InvalidOperationError(
                "AutoLockRenewer.register takes a message received in peek-lock mode or a "
                "session (receiver.session)")
        if self._stop.is_set():
            raise InvalidOperationError("this AutoLockRenewer is closed")
        duration = self._duration if max_lock_renewal_duration is None else (
            max_lock_renewal_duration)
        lock = receiver.lock_duration
        entry = _Entry(receiver, renewable, time.monotonic() + duration,
                       on_lock_renew_failure or self._on_failure, lock, duration)
        with self._guard:  # registered again: the new terms replace the old
            self._entries = [e for e in self._entries if e.target is not renewable]
            self._entries.append(entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sbqueue-lock-renewer",
                                                daemon=True)
                self._thread.start()
                _running.add(self)

    def _left(self, entry: _Entry) -> timedelta:
        return (entry.locked_until or datetime.min.replace(tzinfo=timezone.utc)
                ) - utcnow()

    def _ahead(self, entry: _Entry) -> timedelta:
        """How long before its end a lock is renewed: half of it, or more when commits are
        slow (three times the slowest of the last five), but never more than three quarters
        of it, so that slow commits do not follow one another without pause."""
        measured = timedelta(seconds=3 * max(self._commit_seconds, default=0.0) + _TICK)
        return min(max(entry.lock / 2, measured), entry.lock * 3 / 4)

    def _run(self) -> None:
        while not self._stop.wait(_TICK):
            with self._guard:
                entries = list(self._entries)
            live = []
            for entry in entries:
                if entry.done:
                    self._drop(entry)
                elif time.monotonic() >= entry.until:
                    self._drop(entry)
                    self._timed_out(entry)
                else:
                    live.append(entry)
            due = [e for e in live if self._left(e) <= self._ahead(e)]
            for receiver in {id(e.receiver): e.receiver for e in due}.values():
                # with the due ones, all of this receiver's locks due within two rounds
                batch = [e for e in live if e.receiver is receiver
                         and self._left(e) <= 2 * self._ahead(e)]
                self._renew(batch)

    def _renew(self, batch: list[_Entry]) -> None:
        """Renew the sessions one by one, the messages of one receiver in one commit."""
        messages = [e for e in batch if not isinstance(e.target, ServiceBusSession)]
        for entry in batch:
            if isinstance(entry.target, ServiceBusSession):
                self._timed([entry], entry.renew)
        if messages:
            self._timed(messages, lambda: _renew_messages(messages))

    def _timed(self, batch: list[_Entry], renew: Callable[[], dict[int, Exception] | None]
               ) -> None:
        """Run one renewal commit, remember how long it took, report what failed."""
        started = time.monotonic()
        try:
            failed = renew() or {}
        except StorageConflictError as exc:  # busy partitions: the next round tries again
            log.debug("lock renewal conflicted, retried next round: %s", exc)
            failed = {}
        except Exception as exc:  # reported to each caller's callback
            failed = {id(e): exc for e in batch}
        self._commit_seconds = [*self._commit_seconds[-4:], time.monotonic() - started]
        for entry in batch:
            if id(entry) in failed and not entry.done:
                self._drop(entry)
                cause = failed[id(entry)]
                self._report(entry, AutoLockRenewFailed(
                    f"Failed to auto-renew lock: {cause}", error=cause), call=True)

    def _timed_out(self, entry: _Entry) -> None:
        """The renewal duration is over: the lock is left to expire (as in the SDK, the
        callback is told only when it already has)."""
        error = AutoLockRenewTimeout(f"Auto-renew period ({entry.duration:g} seconds) elapsed.")
        self._report(entry, error, call=self._left(entry) <= timedelta(0))

    @staticmethod
    def _report(entry: _Entry, error: Exception, call: bool) -> None:
        entry.target.auto_renew_error = error
        if call and entry.on_failure is not None:
            try:
                entry.on_failure(entry.target, error)
            except Exception:  # the caller's callback must not stop the renewer
                log.exception("on_lock_renew_failure raised")

    def _drop(self, entry: _Entry) -> None:
        with self._guard:
            if entry in self._entries:
                self._entries.remove(entry)

    def close(self, wait: bool = True) -> None:
        """Stop renewing; with ``wait``, until a renewal under way has finished."""
        self._stop.set()
        thread = self._thread
        if wait and thread is not None:
            thread.join()

    def __enter__(self) -> AutoLockRenewer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


_running: weakref.WeakSet[AutoLockRenewer] = weakref.WeakSet()  # renewers with a thread


@atexit.register
def _close_at_exit() -> None:
    """Stop the renewers left open, each after its renewal under way: their daemon thread
    must not be inside delta-rs, Arrow or py4j when the interpreter finalizes, where
    taking the GIL back ends it mid-call and crashes the process (decision 033)."""
    renewers = list(_running)
    for renewer in renewers:
        renewer._stop.set()
    for renewer in renewers:
        if renewer._thread is not None:
            renewer._thread.join(_EXIT_WAIT)


def _renew_messages(entries: list[_Entry]) -> dict[int, Exception]:
    """Renew these message locks of one receiver in one commit; why each one that failed
    did, by ``id`` of its entry."""
    targets = {id(e.target): e for e in entries}
    outcome = entries[0].receiver.renew_message_locks(
        [e.target for e in entries if isinstance(e.target, ServiceBusReceivedMessage)])
    return {id(targets[key]): error for key, error in outcome.items()}
