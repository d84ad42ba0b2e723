"""Where sbqueue keeps its Spark configuration and its machine-wide caches."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "conf_dir"]


def conf_dir() -> Path:
    """The Spark defaults: ``$SBQUEUE_CONF_DIR``, else the ``conf/`` folder inside the package
    (package data, so an installed wheel carries it; the repository's ``conf/`` links to it)."""
    override = os.environ.get("SBQUEUE_CONF_DIR")
    return Path(override) if override else Path(__file__).resolve().parent / "conf"


def cache_dir() -> Path:
    """Ivy cache and built jars, kept across runs so only the first start downloads."""
    base = os.environ.get("SBQUEUE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sbqueue"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path
