"""The one clock every lock, schedule, time to live, lease and duplicate window reads.

Service Bus rules are about time passing: a lock runs out, a scheduled message comes due,
a message expires. They all read ``utcnow()`` here (inside a Spark query,
``engine.columns.now_column()``, moved as far as this clock), so a test (or a replay) can
move this clock forward instead of sleeping. Waits that are really about elapsed time (a
receive's ``max_wait_time``, backoff between retries) use ``time.monotonic`` and are not
moved.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

__all__ = ["advance", "as_utc", "offset", "reset", "utcnow"]

_lock = threading.Lock()
_offset = timedelta(0)


def utcnow() -> datetime:
    """The engine's now: the wall clock in UTC plus however far the clock was moved."""
    return datetime.now(timezone.utc) + _offset


def as_utc(at: datetime) -> datetime:
    """Aware UTC. A naive time is taken as UTC: every time the engine keeps is UTC, and a
    caller's naive ``*_utc`` value says so (PySpark's naive local times are converted
    where they are collected)."""
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)


def advance(by: timedelta | float) -> datetime:
    """Move the clock forward by ``by`` (a timedelta or seconds); returns the new now.

    Moving it back is refused: every rule assumes time never runs backwards.
    """
    global _offset
    step = by if isinstance(by, timedelta) else timedelta(seconds=by)
    if step < timedelta(0):
        raise ValueError(f"the clock only moves forward; asked to move it by {step}")
    with _lock:
        _offset += step
    return utcnow()


def offset() -> timedelta:
    """How far the clock has been moved from the wall clock."""
    return _offset


def reset() -> None:
    """Back to the wall clock (tests call it when they end)."""
    global _offset
    with _lock:
        _offset = timedelta(0)
