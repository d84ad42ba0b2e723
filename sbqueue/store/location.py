"""Where a namespace or table lives: a local folder (a plain path or ``file:`` URI) or not.

The lowest module of the store: the document stores, the Delta gateways, the driver's
reads and commits and the executor's choice all ask it, and it asks nothing of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

__all__ = ["is_local", "local_path"]


def is_local(root: str) -> bool:
    """Whether ``root`` is a folder of this machine (no scheme, ``file:``, a drive letter)."""
    scheme = urlparse(root).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(root: str) -> Path:
    """The absolute local path of a plain path or ``file:`` URI."""
    parsed = urlparse(root)
    raw = parsed.path if parsed.scheme == "file" else root
    return Path(raw).expanduser().resolve()
