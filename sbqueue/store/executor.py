"""Which executor runs a namespace's operations, decided here and nowhere else (issue 43).

- ``local``: reads with delta-rs and commits the driver makes itself (``store.driver``,
  ``store.tracked``): no Spark job. It needs the namespace's folder on this machine, or an
  S3 prefix the driver reaches (``store.objects``, decision 040).
- ``spark``: DataFrame reads and Spark's MERGE, DML and appends.

``auto`` (the default) is ``local`` for a local folder where delta-rs imports, unless the
session is a Spark Connect client (the folder a Connect server names is the server's, not
this process's), and for an S3 prefix where delta-rs and obstore import (an S3 URL names
one place for every process), else ``spark``. ``SBQUEUE_EXECUTOR=local|spark|auto`` forces it;
``SBQUEUE_DRIVER_READS=0`` is an older spelling of ``spark``. ``SBQUEUE_DRIVER_COMMITS=0``
stays a diagnostic switch: local reads, Spark's commits.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Literal

from sbqueue.exceptions import InvalidOperationError
from sbqueue.location import is_azure, is_local, is_object_store, local_path

__all__ = ["ENV", "Executor", "choose", "delta_rs_installed", "opened", "spark_only"]

ENV = "SBQUEUE_EXECUTOR"
_READS = "SBQUEUE_DRIVER_READS"
Executor = Literal["local", "spark"]
log = logging.getLogger("sbqueue")
_spark_roots: set[str] = set()  # namespaces opened through Spark Connect in this process
_told: set[tuple[str, str]] = set()  # (root, executor) already logged


def _asked() -> tuple[str, str]:
    """What the environment asks for, and the words that say so."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in ("auto", "local", "spark"):
        raise InvalidOperationError(
            f"{ENV}={value!r} is not an executor: give auto, local or spark (issue 43)")
    if value == "auto" and os.environ.get(_READS, "1") == "0":
        return "spark", f"{_READS}=0"
    return value, f"{ENV}={value}"


def _local_refused(root: str, connect: bool) -> str | None:
    """Why the local executor cannot serve ``root``; None where it can."""
    if is_object_store(root):
        if not (delta_rs_installed() and obstore_installed()):
            return "delta-rs and obstore (the deltalake and obstore packages) are not installed"
        return None
    if connect and is_local(root):
        return "the session is a Spark Connect client: the folder is the server's"
    if not is_local(root):
        return f"{root} is neither a local folder nor an S3 or Azure Blob prefix"
    if not delta_rs_installed():
        return "delta-rs (the deltalake package) is not installed"
    return None


@functools.cache
def obstore_installed() -> bool:
    """Whether obstore imports here (the local executor's files on S3)."""
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def delta_rs_installed() -> bool:
    """Whether delta-rs imports here (the local executor's reader and writer)."""
    try:
        import deltalake  # noqa: F401
    except ImportError:
        return False
    return True


def choose(root: str, connect: bool) -> tuple[Executor, str]:
    """The executor of the namespace at ``root`` and why; ``connect``: the session is a
    Spark Connect client. ``SBQUEUE_EXECUTOR=local`` where the local executor cannot
    serve is refused, naming why."""
    asked, words = _asked()
    if asked == "spark":
        return "spark", words
    refused = _local_refused(root, connect)
    if refused is not None and asked == "local":
        raise InvalidOperationError(f"{words}, but {refused}")
    if refused is not None:
        return "spark", refused
    where = ("an Azure Blob prefix" if is_azure(root) else "an S3 prefix"
             if is_object_store(root) else "a local folder")
    return "local", words if asked == "local" else f"{where}, delta-rs installed"


def opened(root: str, connect: bool) -> Executor:
    """``choose`` for a namespace being opened, logged at INFO once per root and choice.
    A local root opened through Spark Connect is remembered, so its tables stay on Spark
    although their paths say local; a choice the environment made is not (``spark_only``
    reads the environment each time)."""
    executor, why = choose(root, connect)
    key = _key(root)
    if connect and is_local(root):
        _spark_roots.add(key)
    if (key, executor) not in _told:
        _told.add((key, executor))
        log.info("sbqueue namespace %s: the %s executor (%s)", root, executor, why)
    return executor


def spark_only(path: str) -> bool:
    """Whether a table at ``path`` must be read and written with Spark (asked for, or in
    a namespace opened through Spark Connect): the store's driver paths ask this."""
    if _asked()[0] == "spark":
        return True
    if not _spark_roots or not is_local(path):
        return False
    key = _key(path)
    return any(key == root or key.startswith(root + "/") for root in _spark_roots)


def _key(path: str) -> str:
    return str(local_path(path)) if is_local(path) else path.rstrip("/")
