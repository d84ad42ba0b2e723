"""Rows of a row-tracking Delta table (local folder or S3) with their row ids, read on the
driver.

Why: a topic's sequence numbers are its plain rows' row ids (Delta row tracking; S3.4,
S8.5), and delta-rs reads no row id. Delta's rule gives each row the id its file
materialized for it (a rewrite such as OPTIMIZE keeps ids that way), else the file's
``baseRowId`` plus the row's place in the file; the log names each file's ``baseRowId``
in the commit that added it. So:

- ``commit_rows``: the rows one commit added (a send's, found by its tag);
- ``rows_by_id``: the rows holding some ids of one partition, found by walking the log
  back from its newest commit to the first one that holds a file covering each id; a
  rewritten file met on the way (OPTIMIZE: no data change) ends the walk, since it keeps
  older ids.

Whatever cannot be told with certainty here (not local, a log file gone, a checkpoint
reached before every id was found, an id covered by a rewritten file) is None: the caller
asks Spark, whose ``_metadata.row_id`` is the reference.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from sbqueue.store import driver
from sbqueue.store.logfiles import commit_actions, has_commit
from sbqueue.store.objects import Files, files_at
from sbqueue.store.thresholds import ROW_IDS_DEPTH

__all__ = ["ROW_ID", "commit_rows", "rows_by_id"]

ROW_ID = "_row_id"  # the key each returned row holds its id under
_MATERIALIZED = "delta.rowTracking.materializedRowIdColumnName"
log = logging.getLogger("sbqueue.store")
Row = dict[str, Any]


def commit_rows(path: str, version: int, columns: Sequence[str]) -> list[Row] | None:
    """The rows commit ``version`` added (``columns``, the partition values, ``ROW_ID``),
    file by file in the commit's order; None when they cannot be read here."""
    if not driver.enabled(path):
        return None
    root = files_at(path)
    try:
        materialized = _materialized_name(path)
        adds = [a["add"] for a in commit_actions(root.child("_delta_log"), version)
                if "add" in a]
        out: list[Row] = []
        for add in adds:
            rows = _file_rows(root, add, columns, materialized)
            if rows is None:
                return None
            out += rows
        return out
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.debug("rows of commit %s of %s not read here: %r", version, path, exc)
        return None


def rows_by_id(path: str, partition: Mapping[str, Any], ids: Iterable[int],
               columns: Sequence[str]) -> dict[int, Row] | None:
    """The rows of ``partition`` (partition column to value) holding ``ids``, by id; an id
    no live file holds is left out. None when that cannot be told here."""
    wanted = set(ids)
    if not driver.enabled(path) or not wanted:
        return None if wanted else {}
    root = files_at(path)
    logdir = root.child("_delta_log")
    try:
        materialized = _materialized_name(path)
        newest = driver.latest(path).version()
        found: dict[int, Row] = {}
        removed: set[str] = set()
        live: list[Mapping[str, Any]] = []
        for version in range(newest, max(-1, newest - ROW_IDS_DEPTH), -1):
            if not has_commit(logdir, version):
                return None  # cleaned up or checkpointed past: Spark tells
            for action in reversed(commit_actions(logdir, version)):
                if "remove" in action:
                    removed.add(action["remove"]["path"])
                add = action.get("add")
                if add is None or add["path"] in removed or not _in(add, partition):
                    continue
                if add.get("dataChange") is False:
                    return None  # rewritten (OPTIMIZE): its rows keep older ids
                live.append(add)
                hits = _covered(add, wanted - found.keys())
                if hits and not _take(root, add, hits, columns, materialized, found):
                    return None
            if found.keys() == wanted:
                return found
            if version == 0:  # every live file seen: the rest are held by none of them
                return None if _any_rewritten(root, live, materialized) else found
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.debug("rows by id of %s not read here: %r", path, exc)
        return None


def _any_rewritten(root: Files, adds: list[Mapping[str, Any]], materialized: str | None
                   ) -> bool:
    """Whether a file holds materialized ids (a rewrite that still called itself a data
    change): then an id outside every range may be in it."""
    return materialized is not None and any(
        materialized in pq.read_schema(root.source(unquote(add["path"]))).names
        for add in adds)


def _materialized_name(path: str) -> str | None:
    name = driver.latest(path).metadata().configuration.get(_MATERIALIZED)
    return None if name is None else str(name)


def _in(add: Mapping[str, Any], partition: Mapping[str, Any]) -> bool:
    values = add.get("partitionValues") or {}
    return all(values.get(k) == str(v) for k, v in partition.items())


def _covered(add: Mapping[str, Any], ids: set[int]) -> set[int]:
    """The ids the file's ``baseRowId`` range covers (its row count from its statistics)."""
    base = add.get("baseRowId")
    rows = json.loads(add.get("stats") or "{}").get("numRecords")
    if base is None or rows is None:
        raise ValueError(f"{add['path']}: no baseRowId or row count in its add action")
    return {i for i in ids if base <= i < base + rows}


def _take(root: Files, add: Mapping[str, Any], hits: set[int], columns: Sequence[str],
          materialized: str | None, found: dict[int, Row]) -> bool:
    """Put the rows of ``hits`` into ``found``; False where a materialized id says the
    file's range is not the rows' ids (a rewritten file: Spark tells)."""
    rows = _file_rows(root, add, columns, materialized)
    if rows is None:
        return False
    by_place = {int(r[ROW_ID]) - int(add["baseRowId"]): r for r in rows}
    for row_id in hits:
        row = by_place.get(row_id - int(add["baseRowId"]))
        if row is None or row[ROW_ID] != row_id:
            return False
        found[row_id] = row
    return True


def _file_rows(root: Files, add: Mapping[str, Any], columns: Sequence[str],
               materialized: str | None) -> list[Row] | None:
    """A data file's rows: ``columns`` it holds, its partition values and ``ROW_ID``;
    None for a file that materialized ids (rewritten): its ids are not its range."""
    file = pq.ParquetFile(root.source(unquote(add["path"])))
    names = set(file.schema_arrow.names)
    if materialized is not None and materialized in names:
        return None
    values = {k: _typed(v) for k, v in (add.get("partitionValues") or {}).items()}
    table = _utc(file.read(columns=[c for c in columns if c in names]))
    base = int(add["baseRowId"])
    return [{**values, **row, ROW_ID: base + i} for i, row in enumerate(table.to_pylist())]


def _utc(table: pa.Table) -> pa.Table:
    """Timestamps as aware UTC microseconds: Spark may write them as INT96 (read naive, in
    nanoseconds), and a Delta TIMESTAMP is a UTC instant."""
    for i, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type) and field.type.tz is None:
            column = table.column(i).cast(pa.timestamp("us")).cast(pa.timestamp("us", "UTC"))
            table = table.set_column(i, field.name, column)
    return table


def _typed(value: str | None) -> Any:
    """A partition value as its column holds it: sbqueue's partition columns are
    integers."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value
