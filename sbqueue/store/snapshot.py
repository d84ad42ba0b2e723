"""A table's live files at its latest version, kept per process and brought forward by
reading only the commit files made since: no listing of the log.

Why (issue 45 point 1, decision 047): a receive on the driver asked delta-rs for the
ledger's and the inbox's latest version three times per message
(``DeltaTable.update_incremental``), and each ask lists the whole ``_delta_log`` folder,
whose files the log retention keeps for 30 days: measured 2.5 ms with 38 log files, 5.2 ms
with 1,000 and 9.5 ms with 3,000 even when nothing was new, so the cost grew with the
entity's history (and on S3 each ask is a LIST of every key). A snapshot here asks one
question per read instead, "is there a commit after mine?" (a ``stat``, or a HEAD on S3),
and reads each new commit file once: add and remove actions change the set of live files.

It follows one table per path: an entity's tables are made at a new path each time
(its id). A log cleanup removes the commits before a checkpoint once they are older than
the log retention: where the snapshot's own commit is gone, the commits after it may be
too, and the table is loaded again. A commit that changes protocol or metadata, a snapshot
older than ``_FRESH`` (a process that stayed idle), or a table this module does not follow
(partition columns of other than integer or string type, reader features that change
what a file's rows are) is loaded again by delta-rs, or left to delta-rs (and looked at
again after ``_FRESH``, not on every read).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from sbqueue.location import driver_uri
from sbqueue.store import warm
from sbqueue.store.logfiles import (
    changes_table,
    has_commit,
    log_files,
    next_commit,
    saw_latest,
    trusted,
)
from sbqueue.store.objects import storage_options

__all__ = ["Live", "Snapshot", "advanced", "current", "held", "held_version"]

_FRESH = 600.0  # seconds a snapshot is brought forward before it is loaded again
_PARTITION_TYPES = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string)


@dataclass(frozen=True)
class Live:
    """One live data file: its path as the log names it, its partition values as the log
    writes them (strings), its size and row count (None: no statistics)."""

    path: str
    values: tuple[tuple[str, str | None], ...]
    size: int
    rows: int | None


@dataclass(frozen=True)
class Snapshot:
    """A table at ``version``: its Arrow schema, partition columns and live files."""

    root: str
    version: int
    schema: pa.Schema
    partition_by: tuple[str, ...]
    files: Mapping[str, Live]
    loaded: float = field(default_factory=time.monotonic, compare=False)
    config: Mapping[str, str] | None = field(default=None, compare=False)  # its properties

    @functools.cached_property
    def adds(self) -> pa.Table:
        """The live files as delta-rs's ``get_add_actions(flatten=True)`` names them (path,
        size_bytes, num_records, ``partition.<column>`` typed by the schema)."""
        live = list(self.files.values())
        columns: dict[str, pa.Array] = {
            "path": pa.array([f.path for f in live], pa.string()),
            "size_bytes": pa.array([f.size for f in live], pa.int64()),
            "num_records": pa.array([f.rows for f in live], pa.int64())}
        for index, name in enumerate(self.partition_by):
            kind = self.schema.field(name).type
            columns[f"partition.{name}"] = pa.array(
                [f.values[index][1] for f in live], pa.string()).cast(kind)
        return pa.table(columns)


_lock = threading.Lock()
_kept: dict[str, Snapshot] = {}  # by table path: the newest snapshot this process holds
_unfollowed: dict[str, float] = {}  # by table path: when it was found not followed here


def current(path: str) -> Snapshot | None:
    """The table at ``path`` at its latest version (None: this module does not follow it;
    read it with delta-rs)."""
    with _lock:
        kept = _kept.get(path)
        refused = _unfollowed.get(path)
    if refused is not None and time.monotonic() - refused < _FRESH:
        return None  # looked at lately: not loaded again on every read
    known = kept
    if known is None or time.monotonic() - known.loaded > _FRESH:
        known = _load(path)
    newer = None if known is None else _forward(known)
    if newer is None and known is not None:  # protocol or metadata changed: load again
        newer = _load(path)
    with _lock:
        if newer is None:  # a table this module does not follow: delta-rs's for a while
            _kept.pop(path, None)
            _unfollowed[path] = time.monotonic()
        elif newer is not kept:
            latest = _kept.get(path)
            if latest is None or latest.version <= newer.version:
                _kept[path] = newer
    return newer


def held(path: str, at_least: int) -> Snapshot | None:
    """The snapshot of ``path`` this process holds, where it is at ``at_least`` or later
    (no look at the store); else None."""
    with _lock:
        kept = _kept.get(path)
    return kept if kept is not None and kept.version >= at_least else None


def held_version(path: str) -> int | None:
    """The version of the table at ``path`` this process holds (no look at the store)."""
    with _lock:
        kept = _kept.get(path)
    return None if kept is None else kept.version


def advanced(path: str, version: int, actions: list[dict[str, Any]]) -> None:
    """After this process committed ``actions`` as ``version``: the kept snapshot, where it
    stood just before, moves to it in memory, so the next read looks only for the commit
    after it (not read back: on S3 a request, a GET of a file this process wrote)."""
    with _lock:
        kept = _kept.get(path)
        if kept is None or kept.version != version - 1 or changes_table(actions):
            return
        files = dict(kept.files)
        _apply(actions, kept.partition_by, files)
        _kept[path] = replace(kept, version=version, files=files)


def _forward(known: Snapshot) -> Snapshot | None:
    """``known`` brought forward by the commits made since, read one by one (a read of
    the next commit file that is not there ends it); None where one changed protocol or
    metadata, or where its own commit is gone (a log cleanup removed the commits after it
    too; not looked at where the version was seen latest lately, ``logfiles.trusted``):
    the caller loads the table again."""
    log = log_files(known.root)
    version, files = known.version, None
    while (actions := next_commit(log, version + 1)) is not None:
        if changes_table(actions):
            return None
        files = dict(known.files) if files is None else files
        _apply(actions, known.partition_by, files)
        version += 1
    if files is None and not trusted(log, version) and not has_commit(log, version):
        return None  # nothing new, and the log was cleaned up past this version
    saw_latest(log, version, known.config)
    return known if files is None else replace(known, version=version, files=files)


def _apply(actions: list[dict[str, Any]], names: tuple[str, ...],
           files: dict[str, Live]) -> None:
    for action in actions:
        removed = action.get("remove")
        if removed is not None:
            files.pop(str(removed["path"]), None)
        add = action.get("add")
        if add is not None:
            values = add.get("partitionValues") or {}
            files[str(add["path"])] = Live(
                str(add["path"]), tuple((n, values.get(n)) for n in names),
                int(add.get("size") or 0), warm.rows_of(add))


def _load(path: str) -> Snapshot | None:
    """The table as delta-rs loads it; None where this module does not follow it."""
    from deltalake import DeltaTable

    table = DeltaTable(driver_uri(path), storage_options=storage_options(path))
    schema = pa.schema(table.schema().to_arrow())
    names = tuple(table.metadata().partition_columns)
    if not warm.plain_files(table) or not all(
            any(test(schema.field(n).type) for test in _PARTITION_TYPES) for n in names):
        return None
    adds = pa.table(table.get_add_actions(flatten=True))
    files = {}
    counts = adds.column("num_records").to_pylist()
    sizes = adds.column("size_bytes").to_pylist()
    parts = adds.select([f"partition.{n}" for n in names]).to_pylist() if names else \
        [{}] * adds.num_rows
    for path_, size, rows, value in zip(adds.column("path").to_pylist(), sizes, counts, parts,
                                        strict=True):
        raw = tuple((n, None if value[f"partition.{n}"] is None else
                     str(value[f"partition.{n}"])) for n in names)
        files[path_] = Live(path_, raw, int(size), rows)
    config = dict(table.metadata().configuration)
    saw_latest(log_files(path), table.version(), config)
    return Snapshot(path, table.version(), schema, names, files, config=config)
