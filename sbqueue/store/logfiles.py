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
from pathlib import Path
from typing import Any

__all__ = ["commit_actions", "commit_file", "publish", "put_if_absent"]


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
