"""Files of a Delta log: commits written on the driver, each put only where none is,
and a commit's actions read back, on a local folder or S3 alike (``store.objects``).

Delta's rule for a log on any store (decision 002, 040): a commit is published by creating
its file only if it does not exist, so of two writers of one version exactly one wins.
Checksum files follow the same rule (the protocol forbids overwriting one).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from sbqueue.store.objects import Files, files_at

__all__ = ["commit_actions", "commit_name", "commit_versions", "first_commit_since",
           "has_commit", "log_files", "publish"]


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


def publish(log: Files, version: int, body: str) -> bool:
    """Write commit ``version`` if no one has; False if another writer took it."""
    return log.put_if_absent(commit_name(version), body.encode("utf-8"))


def commit_actions(log: Files, version: int) -> list[dict[str, Any]]:
    """The actions of commit ``version``, one per line of its file (OSError: not there)."""
    text = log.read(commit_name(version)).decode("utf-8")  # lines end at "\n" only (JSON
    return [json.loads(line) for line in text.split("\n") if line.strip()]  # may hold U+2028)


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
            info = next(a["commitInfo"] for a in commit_actions(log, version)
                        if "commitInfo" in a)
            stamp = info.get("inCommitTimestamp", info["timestamp"])
        except (OSError, ValueError, KeyError, StopIteration):
            return None
        if datetime.fromtimestamp(stamp / 1000, timezone.utc) < since:
            return version + 1
        version -= 1
    return None
