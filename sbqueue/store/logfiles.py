"""Files of a local Delta log written on the driver, each put only where none is.

Delta's rule for a log on a file system (decision 002): a commit is published by creating
its file only if it does not exist, so of two writers of one version exactly one wins.
``link(2)`` of a fully written temporary file does that, and a reader never sees half a
file. Checksum files follow the same rule (the protocol forbids overwriting one).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

__all__ = ["publish", "put_if_absent"]


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


def publish(log: Path, version: int, body: str) -> bool:
    """Write commit ``version`` if no one has; False if another writer took it."""
    return put_if_absent(log / f"{version:020d}.json", body)
