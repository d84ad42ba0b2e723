"""Operation timings of the client, handed to whoever watches (the Prometheus metrics of
``sbqueue.explorer.metrics``): why a hook and not the metrics themselves here: the client
must not need a metrics library, and a process nobody watches pays two clock reads.

An observer is called with (operation, entity path, seconds, outcome), outcome ``ok`` or
the exception's class name, on the thread that ran the operation; it must be quick and
must not raise (what it raises is dropped, never the operation's concern).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["Observer", "observed", "timed", "watch"]

Observer = Callable[[str, str, float, str], None]
F = TypeVar("F", bound=Callable[..., Any])

_observers: list[Observer] = []


def watch(observer: Observer) -> Callable[[], None]:
    """Call ``observer`` after every client operation from now on; returns the function
    that stops it."""
    _observers.append(observer)

    def stop() -> None:
        if observer in _observers:
            _observers.remove(observer)

    return stop


@contextmanager
def observed(operation: str, entity: str) -> Iterator[None]:
    """Time the block as one ``operation`` on ``entity`` and tell the observers."""
    if not _observers:
        yield
        return
    start = time.perf_counter()
    outcome = "ok"
    try:
        yield
    except BaseException as exc:
        outcome = type(exc).__name__
        raise
    finally:
        _tell(operation, entity, time.perf_counter() - start, outcome)


def _tell(operation: str, entity: str, seconds: float, outcome: str) -> None:
    for observer in list(_observers):
        try:
            observer(operation, entity, seconds, outcome)
        except Exception:  # an observer's fault is not the operation's
            continue


def timed(operation: str) -> Callable[[F], F]:
    """A method of a sender or receiver timed as ``operation`` on its entity's path."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            with observed(operation, self.entity.path):
                return method(self, *args, **kwargs)

        return run  # type: ignore[return-value]

    return wrap
