"""Helpers shared by the spike scripts: a session, timing, a scratch folder."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


def session(default_logstore: bool = False):  # type: ignore[no-untyped-def]
    """A local sbqueue session; with default_logstore, Delta's own local log store."""
    from sbqueue.spark import get_session

    extra = {"spark.delta.logStore.file.impl": ""} if default_logstore else None
    return get_session("spike", extra_conf=extra)


@contextmanager
def scratch(name: str) -> Iterator[str]:
    path = tempfile.mkdtemp(prefix=f"sbq-spike-{name}-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def timed(fn: Callable[[], T], repeat: int = 5) -> tuple[float, T]:
    """Median wall time in ms of fn over repeat runs (after one warm-up), and its last result."""
    result = fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return times[len(times) // 2], result


def env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")
