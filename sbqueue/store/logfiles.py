"""Files of a Delta log: commits written on the driver, each put only where none is,
and a commit's actions read back, on a local folder or S3 alike (``store.objects``).

Delta's rule for a log on any store (decision 002, 040): a commit is published by creating
its file only if it does not exist, so of two writers of one version exactly one wins.
Checksum files follow the same rule (the protocol forbids overwriting one).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from sbqueue.store.objects import Files, files_at, no_bucket

__all__ = ["TRUSTED_S", "changes_table", "commit_actions", "commit_name", "commit_versions",
           "first_commit_since", "has_commit", "log_files", "next_commit", "publish",
           "saw_latest", "trusted"]

# On an object store every look at the log is a paid request (issue 44 point 6). A version
# this process saw as a table's latest (its next commit file absent, or written by this
# process) is taken, for this long after, to be still in the log and to need no look of
# its own: log cleanup removes only commit files older than the table's log retention
# (30 days on sbqueue's tables; a table whose retention is under ``_MIN_RETENTION_S`` is
# never trusted), and every commit after a version seen latest was written after that
# look, so none of them is gone either. Entity tables are never made again at a path (an
# entity's tables live under its id), so a trusted version's file is not looked at for a
# table made anew either. On a local folder a look is a ``stat``: always looked.
TRUSTED_S = 60.0
_MIN_RETENTION_S = 3600.0
_seen: dict[str, tuple[int, float]] = {}  # by log folder: (version seen latest, when)
_COMMITS_KEPT = 2048  # commits' actions kept (``commit_actions``), the least used dropped
_commits: OrderedDict[tuple[str, int], list[dict[str, Any]]] = OrderedDict()
_commits_lock = threading.Lock()


def log_files(path: str) -> Files:
    """The ``_delta_log`` folder of the table at ``path``."""
    return files_at(path).child("_delta_log")


def commit_name(version: int) -> str:
    """The file name of commit ``version`` (Delta's protocol name)."""
    return f"{version:020d}.json"


def commit_versions(path: str) -> list[int]:
    """The versions whose commit files the log of the table at ``path`` holds (one
    listing); FileNotFoundError where it holds none."""
    versions = [int(n[:20]) for n in log_files(path).names()
                if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    if not versions:
        raise FileNotFoundError(f"{path}/_delta_log holds no commit")
    return versions


def has_commit(log: Files, version: int) -> bool:
    """Whether commit ``version`` is in the log."""
    return log.exists(commit_name(version))


def publish(log: Files, version: int, body: str) -> str | None:
    """Write commit ``version`` if no one has: its file's identity (``Files.identity``);
    None if another writer took it. A commit written is kept as read (``commit_actions``)."""
    made = log.put_if_absent(commit_name(version), body.encode("utf-8"))
    if made is not None:
        _keep(log, version, _parsed(body))
    return made


def commit_actions(log: Files, version: int, kept: bool = True) -> list[dict[str, Any]]:
    """The actions of commit ``version``, one per line of its file (OSError: not there).
    Kept once read or written, in this process: a commit file never changes once it is
    there (it is put only where none is), and a receive's walks and its snapshot read the
    same new commits (on S3: a GET each). Not ``kept``: read from the log (a caller that
    must learn whether a log cleanup removed it). The caller must not change what it is
    given."""
    key = (log.where, version)
    with _commits_lock:
        found = _commits.get(key) if kept else None
        if found is not None:
            _commits.move_to_end(key)
            return found
    actions = _parsed(log.read(commit_name(version)).decode("utf-8"))
    _keep(log, version, actions)
    return actions


def _parsed(text: str) -> list[dict[str, Any]]:
    # lines end at "\n" only (JSON may hold U+2028)
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def _keep(log: Files, version: int, actions: list[dict[str, Any]]) -> None:
    with _commits_lock:
        _commits[(log.where, version)] = actions
        while len(_commits) > _COMMITS_KEPT:
            _commits.popitem(last=False)


def changes_table(actions: list[dict[str, Any]]) -> bool:
    """Whether a commit's actions change the table's protocol or metadata."""
    return any("protocol" in a or "metaData" in a for a in actions)


def next_commit(log: Files, version: int) -> list[dict[str, Any]] | None:
    """The actions of commit ``version``, or None where it is not (yet) in the log: one
    read, where ``has_commit`` then ``commit_actions`` made two requests on S3."""
    try:
        return commit_actions(log, version)
    except FileNotFoundError as exc:
        if no_bucket(exc):
            raise
        return None


def saw_latest(log: Files, version: int, config: Mapping[str, str] | None) -> None:
    """Note that ``version`` was the table's latest just now (see ``TRUSTED_S``); ``config``:
    the table's properties (its log retention), None where unknown (nothing is noted)."""
    if not log.remote or config is None or _retention_s(config) < _MIN_RETENTION_S:
        return
    kept = _seen.get(log.where)
    if kept is None or kept[0] <= version:
        _seen[log.where] = (version, time.monotonic())


def trusted(log: Files, version: int) -> bool:
    """Whether ``version`` was seen as the table's latest within ``TRUSTED_S``: it is in
    the log, and its next commit is the one to look for (no look at it needed)."""
    kept = _seen.get(log.where)
    return kept is not None and kept[0] == version and time.monotonic() - kept[1] < TRUSTED_S


_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}


def _retention_s(config: Mapping[str, str]) -> float:
    """The table's ``delta.logRetentionDuration`` in seconds (Delta's 30 days where unset;
    0 where it does not parse: nothing is trusted)."""
    text = config.get("delta.logRetentionDuration", "interval 30 days").strip().lower()
    found = re.fullmatch(r"(?:interval\s+)?(\d+)\s*(second|minute|hour|day|week)s?", text)
    return float(found.group(1)) * _UNITS[found.group(2)] if found else 0.0


def first_commit_since(log: Files, since: datetime, before: int, depth: int) -> int | None:
    """The oldest version up to ``before`` after which no commit is older than ``since``
    (by its commit info's time): walking back from ``before``, the version after the first
    commit made before ``since``. None when the walk would pass ``depth`` commits or meets a
    commit file that is gone or has no time (the caller reads some other way)."""
    version = before
    for _ in range(depth):
        if version < 0:
            return 0
        try:
            info = next(a["commitInfo"] for a in commit_actions(log, version, kept=False)
                        if "commitInfo" in a)
            stamp = info.get("inCommitTimestamp", info["timestamp"])
        except (OSError, ValueError, KeyError, StopIteration):
            return None
        if datetime.fromtimestamp(stamp / 1000, timezone.utc) < since:
            return version + 1
        version -= 1
    return None
