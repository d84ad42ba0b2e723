"""An operation's ``timeout=`` (the SDK's), enforced where it can be without a half-done
operation: at each commit.

An sbqueue operation changes nothing until its commit (a Delta commit file, a catalog
document), and a commit cannot be abandoned half way. So the caller's deadline is checked
just before each commit is made: past it, ``OperationTimeoutError`` and nothing of the
operation is stored (its reads and its decisions are thrown away); an operation whose
commit is made in time returns normally. Retries after a lost race check again. The
deadline travels in a context variable, so it belongs to the calling thread (and task)
only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sbqueue.exceptions import OperationTimeoutError

__all__ = ["check", "within"]

_deadline: ContextVar[tuple[float, str, float] | None] = ContextVar("sbqueue_deadline",
                                                                    default=None)


@contextmanager
def within(timeout: float | None, operation: str) -> Iterator[None]:
    """Run the block under ``timeout`` seconds (None: no limit); a refused ``timeout``
    (not a positive number) is a ValueError naming it."""
    if timeout is None:
        yield
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"{operation}: timeout must be a positive number of seconds, got "
                         f"{timeout!r}")
    token = _deadline.set((time.monotonic() + float(timeout), operation, float(timeout)))
    try:
        yield
    finally:
        _deadline.reset(token)


def check() -> None:
    """Before a commit: raise ``OperationTimeoutError`` when the caller's deadline passed."""
    current = _deadline.get()
    if current is not None and time.monotonic() > current[0]:
        raise OperationTimeoutError(
            f"{current[1]} did not finish within its timeout of {current[2]:g} s; nothing "
            "was committed")
