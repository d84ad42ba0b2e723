"""Where a namespace or table lives: a local folder (a plain path or ``file:`` URI), an S3
prefix (``s3://`` or ``s3a://``: one table either way), an Azure Blob container's prefix
(``az://container/prefix``, as delta-rs and obstore name it), or elsewhere.

The lowest module of the package, below even ``spark``: the session's setup, the document
stores, the Delta gateways, the driver's reads and commits and the executor's choice all
ask it, and it imports nothing of sbqueue (``tests/unit/test_layers.py``).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from urllib.parse import urlparse

__all__ = ["driver_uri", "is_azure", "is_local", "is_object_store", "is_s3", "local_path",
           "object_parts"]

_S3 = ("s3", "s3a")
_AZURE = ("az",)


@functools.lru_cache(maxsize=4096)
def _scheme(root: str) -> str:
    """``root``'s URL scheme, parsed once per process: every driver read and commit asks
    where its table lives several times (a parse ~10 us, decision 052)."""
    return urlparse(root).scheme


def is_local(root: str) -> bool:
    """Whether ``root`` is a folder of this machine (no scheme, ``file:``, a drive letter)."""
    scheme = _scheme(root)
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(root: str) -> Path:
    """The absolute local path of a plain path or ``file:`` URI."""
    if "~" in root:  # the home folder may change meanwhile: made again
        return _local_path.__wrapped__(root, os.getcwd())
    return _local_path(root, os.getcwd())


@functools.lru_cache(maxsize=4096)
def _local_path(root: str, cwd: str) -> Path:
    """``local_path`` once per path and working folder (a relative path is the working
    folder's)."""
    parsed = urlparse(root)
    raw = Path(parsed.path if parsed.scheme == "file" else root).expanduser()
    return _resolved(str(raw)) if raw.is_absolute() else Path(cwd, raw).resolve()


@functools.lru_cache(maxsize=4096)
def _resolved(absolute: str) -> Path:
    """An absolute path with its links resolved, once per process: resolving walks every
    folder of it (a ``stat`` each, ~0.17 ms measured), and each driver read and commit
    names its table's folders several times."""
    return Path(absolute).resolve()


def is_s3(root: str) -> bool:
    """Whether ``root`` names an S3 bucket's prefix (``s3://`` or Hadoop's ``s3a://``)."""
    return _scheme(root) in _S3


def is_azure(root: str) -> bool:
    """Whether ``root`` names an Azure Blob container's prefix (``az://container/...``)."""
    return _scheme(root) in _AZURE


def is_object_store(root: str) -> bool:
    """Whether ``root`` lies on an object store the driver reaches itself (S3, Azure)."""
    return is_s3(root) or is_azure(root)


def object_parts(root: str) -> tuple[str, str]:
    """(bucket or container, key prefix without slashes at its ends) of an object store's
    URL."""
    parsed = urlparse(root)
    return parsed.netloc, parsed.path.strip("/")


def driver_uri(path: str) -> str:
    """``path`` as delta-rs and obstore name it: a local absolute path, ``s3://`` or
    ``az://``."""
    if is_local(path):
        return str(local_path(path))
    if is_object_store(path):
        bucket, key = object_parts(path)
        return f"{'s3' if is_s3(path) else 'az'}://{bucket}/{key}".rstrip("/")
    return path
