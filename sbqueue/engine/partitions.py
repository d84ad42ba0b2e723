"""Which partitions an operation works on, so that consumers spread instead of colliding.

One ``PartitionBoard`` per entity per process (``board_for``). Threads of a process lease
partitions from it: a receive takes free partitions (random order, skipping those recently
found empty or conflicting), a settle waits for the partitions of its messages. So threads
of one process never conflict with each other; separate processes and Spark applications
spread by the random order and back off from partitions where they met a conflict (S14.1).
It also keeps what the last receives saw of each partition's backlog.
Why leases: docs/decisions/004-cursor-layout.md.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import deque
from collections.abc import Iterator

__all__ = ["PartitionBoard", "board_for"]

EMPTY_SECONDS = 1.0  # a partition found without deliverable messages is skipped this long
ESTIMATE_SECONDS = 30.0  # how long a backlog estimate is trusted (a loaded machine takes
# 5-10 s between two receives; a stale estimate only costs one receive taking all partitions)
GRACE_SECONDS = (5.0, 120.0)  # bounds of the extra time a stored lock gets for its commit
CONFLICT_SECONDS = (0.5, 2.0)  # a partition that conflicted is avoided for a random while


class PartitionBoard:
    """Leases, recent emptiness and conflicts, and cursor hints for one entity's partitions."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._cond = threading.Condition()
        self._busy: set[int] = set()
        self._avoid_until: dict[int, float] = {}
        self._estimate: dict[int, tuple[int, float]] = {}  # partition -> (messages, valid until)
        self._attempts: deque[float] = deque(maxlen=8)  # recent receives, read to commit

    # -- leases ----------------------------------------------------------------------------
    def take(self, messages: int, exclude: set[int] | None = None) -> list[int]:
        """Lease free partitions for a receive of ``messages``, without waiting.

        While some free partition's backlog is unknown (or its estimate is stale), take every
        free partition: one commit learns them all. Otherwise take the partitions with the
        most messages first, as few as fill the request. Partitions that conflicted recently
        come last.
        """
        with self._cond:
            now = time.monotonic()
            free = [p for p in range(self.partitions)
                    if p not in self._busy and p not in (exclude or set())]
            random.shuffle(free)
            calm = [p for p in free if self._avoid_until.get(p, 0.0) <= now] or free
            known = {p: n for p, (n, until) in self._estimate.items() if until > now}
            if any(p not in known for p in calm):
                chosen = calm
            else:
                chosen, total = [], 0
                for p in sorted(calm, key=lambda q: -known[q]):
                    if total >= messages:
                        break
                    chosen.append(p)
                    total += known[p]
            self._busy.update(chosen)
            return chosen

    def estimate(self, counts: dict[int, int]) -> None:
        """Messages still deliverable per partition, as the last receive saw them."""
        with self._cond:
            now = time.monotonic()
            for p, n in counts.items():
                self._estimate[p] = (n, now + (ESTIMATE_SECONDS if n else EMPTY_SECONDS))

    def wait_for_free(self, timeout: float) -> None:
        """Block until some partition is released (or ``timeout`` passes)."""
        with self._cond:
            if len(self._busy) >= self.partitions:
                self._cond.wait(timeout)

    def release(self, partitions: list[int]) -> None:
        with self._cond:
            self._busy.difference_update(partitions)
            self._cond.notify_all()

    @contextlib.contextmanager
    def hold(self, partitions: list[int]) -> Iterator[None]:
        """Lease exactly these partitions for a settle, waiting while another thread has
        any of them."""
        wanted = set(partitions)
        with self._cond:
            while wanted & self._busy:
                self._cond.wait()
            self._busy.update(wanted)
        try:
            yield
        finally:
            self.release(list(wanted))

    # -- what was learned ------------------------------------------------------------------
    def conflicted(self, partitions: list[int]) -> None:
        self._avoid(partitions, random.uniform(*CONFLICT_SECONDS))

    def _avoid(self, partitions: list[int], seconds: float) -> None:
        with self._cond:
            until = time.monotonic() + seconds
            for p in partitions:
                self._avoid_until[p] = until


    def saw_attempt(self, seconds: float) -> None:
        with self._cond:
            self._attempts.append(seconds)

    def lock_grace(self) -> float:
        """Seconds to add to a lock stamped before its commit: twice the slowest recent
        read-to-commit time, 5 s to 120 s (docs/decisions/004-cursor-layout.md)."""
        with self._cond:
            slowest = max(self._attempts, default=0.0)
        return min(GRACE_SECONDS[1], max(GRACE_SECONDS[0], 2 * slowest))


_boards: dict[str, PartitionBoard] = {}
_boards_lock = threading.Lock()


def board_for(key: str, partitions: int) -> PartitionBoard:
    """The process-wide board of the entity stored at ``key`` (its ledger path)."""
    with _boards_lock:
        board = _boards.get(key)
        if board is None or board.partitions != partitions:
            board = _boards[key] = PartitionBoard(partitions)
        return board
