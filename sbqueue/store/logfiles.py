"""Files of a local Delta log: commits written on the driver, each put only where none is,
and a commit's actions read back.

Delta's rule for a log on a file system (decision 002): a commit is published by creating
its file only if it does not exist, so of two writers of one version exactly one wins.
``link(2)`` of a fully written temporary file does that, and a reader never sees half a
file. Checksum files follow the same rule (the protocol forbids overwriting one).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = ["commit_actions", "commit_file", "first_commit_since", "publish", "put_if_absent"]


def put_if_absent(target: Path, text: str) -> bool:
    """Create ``target`` holding ``text``, whole, unless it exists; False if it did."""
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.link(temp, target)
        return True
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            temp.unlink(missing_ok=True)


def commit_file(log: Path, version: int) -> Path:
    """The file of commit ``version`` in the log folder ``log`` (Delta's protocol name)."""
    return log / f"{version:020d}.json"


def publish(log: Path, version: int, body: str) -> bool:
    """Write commit ``version`` if no one has; False if another writer took it."""
    return put_if_absent(commit_file(log, version), body)


def commit_actions(log: Path, version: int) -> list[dict[str, Any]]:
    """The actions of commit ``version``, one per line of its file (OSError: not there)."""
    with open(commit_file(log, version), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def first_commit_since(log: Path, since: datetime, before: int, depth: int) -> int | None:
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
