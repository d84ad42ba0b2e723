"""Where a namespace or table lives: a local folder (a plain path or ``file:`` URI), an S3
prefix (``s3://`` or ``s3a://``: one table either way), or elsewhere.

The lowest module of the package, below even ``spark``: the session's setup, the document
stores, the Delta gateways, the driver's reads and commits and the executor's choice all
ask it, and it imports nothing of sbqueue (``tests/unit/test_layers.py``).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from urllib.parse import urlparse

__all__ = ["driver_uri", "is_local", "is_s3", "local_path", "s3_parts"]

_S3 = ("s3", "s3a")


def is_local(root: str) -> bool:
    """Whether ``root`` is a folder of this machine (no scheme, ``file:``, a drive letter)."""
    scheme = urlparse(root).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(root: str) -> Path:
    """The absolute local path of a plain path or ``file:`` URI."""
    parsed = urlparse(root)
    raw = Path(parsed.path if parsed.scheme == "file" else root).expanduser()
    return _resolved(str(raw)) if raw.is_absolute() else raw.resolve()


@functools.lru_cache(maxsize=4096)
def _resolved(absolute: str) -> Path:
    """An absolute path with its links resolved, once per process: resolving walks every
    folder of it (a ``stat`` each, ~0.17 ms measured), and each driver read and commit
    names its table's folders several times."""
    return Path(absolute).resolve()


def is_s3(root: str) -> bool:
    """Whether ``root`` names an S3 bucket's prefix (``s3://`` or Hadoop's ``s3a://``)."""
    return urlparse(root).scheme in _S3


def s3_parts(root: str) -> tuple[str, str]:
    """(bucket, key prefix without slashes at its ends) of an S3 URL."""
    parsed = urlparse(root)
    return parsed.netloc, parsed.path.strip("/")


def driver_uri(path: str) -> str:
    """``path`` as delta-rs and obstore name it: a local absolute path, or ``s3://``."""
    if is_local(path):
        return str(local_path(path))
    if is_s3(path):
        bucket, key = s3_parts(path)
        return f"s3://{bucket}/{key}".rstrip("/")
    return path
