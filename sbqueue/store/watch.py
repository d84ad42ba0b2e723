"""Whether a table has a commit after a version the caller saw: one look at the log for the
next commit file (issue 45 point 2, decision 045).

Why: a receiver waiting on an empty queue needs to know when to look again. A full look
reads the ledger and the inbox head (~25 ms warm); whether commit ``v + 1`` exists is one
``stat`` of a local file (microseconds) or one HEAD request on S3. A commit file appears
whole (put if absent), so its presence is the commit. A file-system watch (inotify) was
weighed and left: each watcher holds one of the user's 128 inotify instances, many
receivers in many processes share a machine, and it does not serve S3 at all.
"""

from __future__ import annotations

import functools
import logging

from sbqueue.location import is_local
from sbqueue.store.driver import enabled, latest, or_none
from sbqueue.store.logfiles import has_commit, log_files
from sbqueue.store.objects import Files

__all__ = ["Watch"]

log_ = logging.getLogger("sbqueue.store")


class Watch:
    """The versions of some tables as last seen, moved forward by looking for the next
    commit file of each; ``None`` from ``watched`` where a table is not read here."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.logs = [log_files(p) for p in paths]
        self.seen: list[int] | None = None
        # Seconds between looks for a next commit: a stat locally; on S3 a request, paid for.
        self.tick = 0.04 if all(is_local(p) for p in paths) else 0.25

    @staticmethod
    def watched(paths: list[str]) -> Watch | None:
        """A watch of ``paths``, or None where any is not read on the driver (the Spark
        executor: the caller pauses without one)."""
        return Watch(paths) if all(enabled(p) for p in paths) else None

    def mark(self) -> bool:
        """Bring the versions seen up to each table's latest; whether any moved (True the
        first time). The first mark reads each table's latest version (its log); later ones
        look only for the commits after what was seen."""
        if self.seen is None:
            found = [or_none(functools.partial(_latest, p)) for p in self.paths]
            self.seen = [-1 if v is None else v for v in found]
            return True
        moved = False
        for k, log in enumerate(self.logs):
            while _has(log, self.seen[k] + 1):
                self.seen[k] += 1
                moved = True
        return moved

    def moved(self) -> bool:
        """Whether any table has a commit after the versions seen (not marked)."""
        if self.seen is None:
            return True
        return any(_has(log, v + 1) for log, v in zip(self.logs, self.seen, strict=True))


def _latest(path: str) -> int:
    return int(latest(path).version())


def _has(log: Files, version: int) -> bool:
    """Whether commit ``version`` is in ``log``; False where the store could not tell (a
    request refused for a moment: the wait goes on, and the next full look, at most
    ``_LOOK_EVERY`` away, reports an error that lasts)."""
    try:
        return has_commit(log, version)
    except Exception as exc:  # any store client's error: the wait goes on
        log_.debug("commit watch of %s could not look: %r", log.where, exc)
        return False
