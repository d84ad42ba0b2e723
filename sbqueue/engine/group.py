"""Group commit: the work of many callers in one process gathered into one commit.

A Delta commit costs far more than the rows it carries, so when several threads (or
asyncio tasks, through their threads) of one process receive from or complete on the same
entity at once, one of them commits for all. The first caller while no commit of its group
is running leads: it takes what is waiting (FIFO, up to a capacity), runs it as one
operation, hands each caller its own result and wakes them. Callers that arrive meanwhile
wait for that commit to end and then lead the next one together. A caller alone pays
nothing extra: it leads at once. Each caller returns only when the commit carrying its
work has landed (or failed: then every caller of that commit gets the error).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["Group", "group_for"]

LINGER = 0.010  # seconds a leader waits for the callers its last commit had
P = TypeVar("P")
R = TypeVar("R")


@dataclass
class _Slot(Generic[P]):
    payload: P
    weight: int
    done: bool = False
    value: Any = None
    error: BaseException | None = None


class Group(Generic[P, R]):
    """Callers' payloads run together by ``run`` (payloads in, one result per payload out,
    in order), at most ``capacity`` weight a commit."""

    def __init__(self, run: Callable[[list[P]], list[R]], capacity: int) -> None:
        self._run = run
        self._capacity = capacity
        self._cond = threading.Condition()
        self._waiting: list[_Slot[P]] = []
        self._leading = False
        self.commits = 0  # how many runs (benchmarks compare it with the callers served)
        self._last = 1  # callers that commit together lately (the last commit's, or fewer)
        self._lingering = False

    def submit(self, payload: P, weight: int = 1) -> R:
        """Run ``payload`` in the next commit of the group; its own result."""
        slot: _Slot[P] = _Slot(payload, weight)
        with self._cond:
            self._waiting.append(slot)
            if self._lingering:
                self._cond.notify_all()
            while self._leading and not slot.done:
                self._cond.wait()
            if not slot.done:
                self._leading = True
                self._linger()
                batch = self._take(slot)
        if not slot.done:
            self._lead(batch)
        if slot.error is not None:
            raise slot.error
        return slot.value  # type: ignore[no-any-return]

    def _linger(self) -> None:
        """A leader whose last commit carried several callers waits up to ``LINGER`` for
        as many to be waiting (held under the condition): callers woken together by one
        commit arrive a moment apart, and the first to arrive led alone, so four threads
        made about as many commits as one."""
        if self._last <= 1:
            return
        until = time.monotonic() + LINGER
        self._lingering = True
        try:
            while len(self._waiting) < self._last and (left := until - time.monotonic()) > 0:
                self._cond.wait(left)
        finally:
            self._lingering = False

    def _take(self, own: _Slot[P]) -> list[_Slot[P]]:
        """The leader's slot and then the longest waiting ones, up to the capacity."""
        batch, weight = [own], own.weight
        for slot in self._waiting:
            if slot is not own and weight + slot.weight <= self._capacity:
                batch.append(slot)
                weight += slot.weight
        taken = {id(s) for s in batch}
        self._waiting = [s for s in self._waiting if id(s) not in taken]
        return batch

    def _lead(self, batch: list[_Slot[P]]) -> None:
        try:
            results = self._run([s.payload for s in batch])
            for slot, value in zip(batch, results, strict=True):
                slot.value = value
        except BaseException as exc:  # every caller of a failed commit learns it
            for slot in batch:
                slot.error = exc
        finally:
            with self._cond:
                self.commits += 1
                # callers seen together lately: a lone commit lowers it by one, so a caller
                # left alone stops waiting for the others after a few commits
                self._last = max(len(batch), self._last - 1)
                for slot in batch:
                    slot.done = True
                self._leading = False
                self._cond.notify_all()


_groups: dict[Hashable, Group[Any, Any]] = {}
_groups_lock = threading.Lock()


def group_for(key: Hashable, make: Callable[[], Group[P, R]]) -> Group[P, R]:
    """The process's group for ``key`` (an entity's tables and the kind of work)."""
    with _groups_lock:
        group = _groups.get(key)
        if group is None:
            group = _groups[key] = make()
        return group
