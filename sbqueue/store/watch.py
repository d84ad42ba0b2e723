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
from sbqueue.store.snapshot import held_version

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
        """Bring the versions seen up to what this process holds of each table (before a
        look: what the look will read is that or newer, so a commit after it is not
        missed); whether any moved (True the first time). No look at the store where the
        process holds the table (``store.snapshot``): a receive that finds messages makes
        no request for its watch. A table not held: its latest version read the first
        time (its log), then the commits after it looked for."""
        first = self.seen is None
        seen = self.seen if self.seen is not None else [-1] * len(self.paths)
        moved = first
        for k, (path, log) in enumerate(zip(self.paths, self.logs, strict=True)):
            held = held_version(path)
            if held is None and first:
                found = or_none(functools.partial(_latest, path))
                held = -1 if found is None else found
            elif held is None:
                held = seen[k]
                while _has(log, held + 1):
                    held += 1
            if held > seen[k]:
                seen[k], moved = held, True
        self.seen = seen
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
