"""What a Delta table's log says, read on the driver with delta-rs: no Spark job.

Commit times and history, the files of the latest version by partition, whether a version
can still be read, a column's largest value from the file statistics, and the ranges a
commit added. Each returns None where it cannot be told here (not readable here, a
protocol feature delta-rs lacks, a file gone under a vacuum) and the caller asks Spark.
"""

from __future__ import annotations

import functools
import json
import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sbqueue.location import driver_uri
from sbqueue.store.driver import Commit, enabled, latest, open_table, or_none
from sbqueue.store.logfiles import commit_actions, log_files
from sbqueue.store.objects import files_at

__all__ = [
    "FileRange",
    "commit_ranges",
    "commits",
    "committed_at",
    "file_stats",
    "files_by_partition",
    "files_present",
    "history",
    "tagged_version",
]

log = logging.getLogger("sbqueue.store")


def committed_at(path: str) -> datetime | None:
    """When the latest version was committed (its commit info, from the log); None when it
    cannot be told here."""
    newest = history(path, 1)
    return None if not newest else newest[0][1]


def commits(path: str) -> list[tuple[int, datetime]] | None:
    """Every version still in the log with its commit time, oldest first (the commit
    infos, no data file); None when it cannot be told here."""
    found = history(path)
    return None if found is None else [(version, at) for version, at, _, _ in found[::-1]]


def history(path: str, limit: int | None = None) -> list[Commit] | None:
    """The newest ``limit`` commits (None: all the log holds), newest first, from their
    commit infos (no data file); None when it cannot be told here."""
    if not enabled(path):
        return None

    def read() -> list[Commit] | None:
        try:
            found = [(int(info["version"]),
                      datetime.fromtimestamp(info["timestamp"] / 1000, timezone.utc),
                      str(info.get("operation", "")), info.get("userMetadata"))
                     for info in latest(path).history(limit)]
        except (KeyError, TypeError):  # a commit info without them: Spark's history tells
            return None
        return sorted(found, key=lambda c: c[0], reverse=True)
    return or_none(read)


def files_by_partition(path: str, columns: Sequence[str]) -> dict[tuple[Any, ...], int] | None:
    """How many data files of the latest version each value of the partition ``columns``
    holds, from the log's add actions (no data file read); None when it cannot be told
    here."""
    if not enabled(path):
        return None

    def read() -> dict[tuple[Any, ...], int]:
        actions = pa.table(latest(path).get_add_actions(flatten=True))
        values = [actions.column(f"partition.{c}").to_pylist() for c in columns]
        return dict(Counter(zip(*values, strict=True)))
    return or_none(read)


def files_present(path: str, version: int) -> bool | None:
    """Whether ``version`` can still be read: its log entries kept and every data file it
    names still stored (a vacuum removes the files only old versions name). None when it
    cannot be told here."""
    if not enabled(path):
        return None
    from urllib.parse import unquote, urlparse

    try:
        table = open_table(path, version)
    except Exception:  # its commits were cleaned from the log
        return False
    root, base = files_at(path), driver_uri(path).rstrip("/") + "/"
    for uri in table.file_uris():
        parsed = urlparse(uri)
        name = unquote(parsed.path) if parsed.scheme in ("", "file") else uri
        if not name.startswith(base) or not root.exists(name[len(base):]):
            return False
    return True


def file_stats(path: str, column: str) -> tuple[int, Any] | None:
    """(rows, largest ``column``) of the latest version, from the log's file statistics
    alone (no data file read); None when it cannot be told here (a file without them)."""
    if not enabled(path):
        return None

    actions = or_none(lambda: pa.table(
        latest(path).get_add_actions(flatten=True)))
    if actions is None:
        return None
    if actions.num_rows == 0:
        return 0, None
    largest = f"max.{column}"
    if largest not in actions.column_names or actions.column("num_records").null_count:
        return None
    return int(pc.sum(actions.column("num_records")).as_py()), pc.max(
        actions.column(largest)).as_py()


FileRange = tuple[int, int, int]  # (lowest, highest, rows) of one data file's column


def commit_ranges(path: str, version: int, partition: str, column: str
                  ) -> dict[int, list[FileRange]] | None:
    """Per value of the integer ``partition`` column, the files commit ``version`` added:
    each one's range of ``column`` and its row count, from the commit's add actions (one
    log file, no data file read), lowest first; None when it cannot be told here (not
    local, the log file gone, a file without statistics)."""
    if not enabled(path):
        return None
    return _commit_ranges(path, version, partition, column)


@functools.lru_cache(maxsize=4096)  # a commit file never changes once written; a head walk
# passes each commit since the earliest cursor on every receive (more than a few dozen)
def _commit_ranges(path: str, version: int, partition: str, column: str
                   ) -> dict[int, list[FileRange]] | None:
    found: dict[int, list[FileRange]] = {}
    try:
        for action in commit_actions(log_files(path), version):
            if "cdc" in action:  # its change feed is these files, not its adds
                return None
            add = action.get("add")
            if add is None or add.get("dataChange") is False:  # a compaction: no rows added
                continue
            stats = json.loads(add.get("stats") or "{}")
            low, high = (stats.get(k, {}).get(column) for k in ("minValues", "maxValues"))
            if low is None or high is None or "numRecords" not in stats:
                return None
            found.setdefault(int(add["partitionValues"][partition]), []).append(
                (int(low), int(high), int(stats["numRecords"])))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.debug("commit ranges not read here: %r", exc)
        return None
    return {p: sorted(ranges) for p, ranges in found.items()}


def tagged_version(path: str, tag: str, depth: int = 1000) -> int | None:
    """The version of the commit among the newest ``depth`` that carries ``tag`` as its
    user metadata (``store.delta.append``); None when it cannot be told here."""
    if not enabled(path):
        return None

    history = or_none(lambda: latest(path).history(depth))
    if history is None:
        return None
    return next((int(c["version"]) for c in history if c.get("userMetadata") == tag), None)
