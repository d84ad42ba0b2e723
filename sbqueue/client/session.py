"""``ServiceBusSession``: the session a session receiver holds (S10.3, S10.5).

As in azure-servicebus, it is reached as ``receiver.session``; its lock is taken when the
receiver opens (a given session id, or ``NEXT_AVAILABLE_SESSION``) and released when the
receiver closes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sbqueue.core.clock import utcnow
from sbqueue.core.keywords import OPERATION, accept, honours_timeout
from sbqueue.engine.sessions.ops import SessionLock, Sessions
from sbqueue.exceptions import SessionLockLostError

__all__ = ["ServiceBusSession"]


class ServiceBusSession:
    """A locked session: its id, lock end, state and lock renewal."""

    def __init__(self, sessions: Sessions, lock: SessionLock) -> None:
        self._sessions = sessions
        self._lock = lock
        self.released = False
        self.auto_renew_error: Exception | None = None  # set by an AutoLockRenewer
        self._settling = 0  # settlements of this session's messages in flight
        self._quiet = threading.Condition()

    @property
    def session_id(self) -> str:
        return self._lock.session_id

    @property
    def locked_until_utc(self) -> datetime:
        return self._lock.locked_until

    @property
    def sessions(self) -> Sessions:
        return self._sessions

    @property
    def lock(self) -> SessionLock:
        return self._lock

    def check_held(self) -> None:
        """SessionLockLost once the lock has ended or was released (S10.3)."""
        if self.released or self._lock.locked_until <= utcnow():
            raise SessionLockLostError(
                f"the lock on session {self.session_id!r} ended at "
                f"{self._lock.locked_until} (S10.3)")

    def get_state(self, **kwargs: object) -> bytes | None:
        """The session state, None if never set (S10.5)."""
        accept("get_state", kwargs, OPERATION)
        return self._sessions.get_state(self.session_id)

    @honours_timeout
    def set_state(self, state: bytes | str | None, **kwargs: object) -> None:
        """Store the session state; it outlives the session's messages (S10.5)."""
        accept("set_state", kwargs, OPERATION)
        self.check_held()
        self._sessions.set_state(self._lock, state)

    @honours_timeout
    def renew_lock(self, **kwargs: object) -> datetime:
        """Extend the session lock by the lock duration; the new end (S10.3)."""
        accept("renew_lock", kwargs, OPERATION)
        self.check_held()
        self._lock = self._sessions.renew(self._lock)
        return self._lock.locked_until

    @contextmanager
    def settling(self) -> Iterator[None]:
        """Hold the release off while a settlement of this session's messages is in flight.
        A complete is a completion record valid while its lock is held (decision 011); a
        release that committed first would free the lock before the record landed, and
        the record would count for nothing while its caller heard "done"."""
        with self._quiet:
            self.check_held()
            self._settling += 1
        try:
            yield
        finally:
            with self._quiet:
                self._settling -= 1
                self._quiet.notify_all()

    def release(self) -> None:
        """Give the session up (the receiver closing does this), once the settlements in
        flight have landed; a settlement begun after this raises SessionLockLost."""
        with self._quiet:
            if self.released:
                return
            self.released = True
            # At most until the lock ends: a record landing after that is late, and its
            # writer reads back whether it counted (a hung settlement cannot hang close).
            while self._settling and (left := self._left()) > 0:
                self._quiet.wait(left)
        self._sessions.release(self._lock)

    def _left(self) -> float:
        return (self._lock.locked_until - utcnow()).total_seconds()

    def __repr__(self) -> str:
        return f"ServiceBusSession(session_id={self.session_id!r}, " \
               f"locked_until_utc={self.locked_until_utc!r})"
