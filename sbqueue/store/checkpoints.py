"""Checkpoints of the tables this process commits to, written beside the caller's work.

Why: after its own commits, sbqueue does what Spark does after its: a checkpoint at the
table's interval, then the expired log files removed (else readers replay, and every
listing reads, an ever longer log when most commits are made here). delta-rs loads the
table to write one, ~50 ms on a local folder: on the caller's path that was one complete
in ten paying five times the others (issue 45). The commit stands without its checkpoint,
so it is written by one worker thread per process, the newest version of each table only
(an older one still waiting is passed). The worker is joined at interpreter exit, as
every ``concurrent.futures`` worker is; a process killed first leaves the checkpoint to
the next interval, as a Spark driver killed after a commit does.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from sbqueue.location import driver_uri
from sbqueue.store.objects import Files, storage_options

__all__ = ["CHECKPOINT_EVERY", "later", "now", "written"]

CHECKPOINT_EVERY = 10  # Delta's default ``delta.checkpointInterval``
logger = logging.getLogger("sbqueue.store")

_lock = threading.Lock()
_waiting: dict[str, tuple[Files, int, Mapping[str, str]]] = {}  # table -> newest asked
_worker: ThreadPoolExecutor | None = None


def later(path: str, log: Files, version: int, config: Mapping[str, str]) -> None:
    """After this process committed ``version``: where the table's interval says, a
    checkpoint (``now``) on the worker thread. Never raises."""
    global _worker
    if version % _interval(config):
        return
    with _lock:
        asked = _waiting.get(path)
        _waiting[path] = (log, max(version, asked[1]) if asked else version, config)
        if asked is not None:
            return  # the worker has it queued already
        if _worker is None:
            _worker = ThreadPoolExecutor(1, thread_name_prefix="sbqueue-checkpoint")
        try:
            _worker.submit(_write, path)
            return
        except RuntimeError:  # the interpreter is shutting down: no new thread
            del _waiting[path]
    now(path, log, version, config)


def written() -> None:
    """Wait until every checkpoint asked so far in this process is written (or given up)."""
    with _lock:
        worker = _worker
    if worker is not None:
        try:
            done: Future[None] = worker.submit(lambda: None)
        except RuntimeError:  # shut down: whatever was asked has run
            return
        done.result()


def _write(path: str) -> None:
    with _lock:
        log, version, config = _waiting.pop(path)
    now(path, log, version, config)


def now(path: str, log: Files, version: int, config: Mapping[str, str]) -> None:
    """A checkpoint of ``path`` at ``version`` (delta-rs writes it, row-tracking domain and
    row ids included), then the expired log files removed. Never raises: the commit is
    there whatever happens here."""
    from deltalake import DeltaTable

    try:
        table = DeltaTable(driver_uri(path), version=version,
                           storage_options=storage_options(path))
        table.create_checkpoint()
        if config.get("delta.enableExpiredLogCleanup", "true").strip().lower() != "false":
            table.cleanup_metadata()  # by ``delta.logRetentionDuration`` (30 days unset)
            _drop_lone_checksums(log)
    except Exception as exc:
        logger.debug("no checkpoint or log cleanup at %s of %s: %r", version, path, exc)


def _interval(config: Mapping[str, str]) -> int:
    """The table's ``delta.checkpointInterval`` (Delta's default where unset or invalid)."""
    try:
        every = int(config.get("delta.checkpointInterval", CHECKPOINT_EVERY))
    except ValueError:
        return CHECKPOINT_EVERY
    return every if every > 0 else CHECKPOINT_EVERY


def _drop_lone_checksums(log: Files) -> None:
    """Remove the checksum files of versions whose commits the cleanup removed (delta-rs
    leaves them; Spark's cleanup removes them with the commits)."""
    names = log.names()
    oldest = min((int(n[:20]) for n in names if _versioned(n, ".json")), default=0)
    for name in names:
        if _versioned(name, ".crc") and int(name[:20]) < oldest:
            log.delete(name)


def _versioned(name: str, suffix: str) -> bool:
    return len(name) == 20 + len(suffix) and name.endswith(suffix) and name[:20].isdigit()


def _forget_worker() -> None:
    """In a forked child the worker thread is not there: a new one is made when asked."""
    global _worker, _lock
    _worker, _lock = None, threading.Lock()
    _waiting.clear()


os.register_at_fork(after_in_child=_forget_worker)
