"""A rewrite of some partitions, and a plain blind append, committed on the driver by
sbqueue's own writer: for a small table with no row tracking (the ledger).

Why (issue 45, decision 047): a receive commits its locks by rewriting its ledger
partitions and a completion appends records; through delta-rs's ``write_deltalake`` each
commit cost 14-18 ms (measured in the client loop: two of them per message, half of a
receive and almost all of a complete), most of it the writer's planning and conflict
machinery, not the bytes. A commit here is what those two writes amount to:

- each partition's new rows to one Parquet file (``store.data_files``), written first;
- the commit: ``commitInfo`` (the caller's tag as ``userMetadata``), a ``remove`` for
  every file the read version held in the partitions rewritten, an ``add`` per new file;
- published only where no commit file is (``store.logfiles``); when another writer took
  the version, the commits made since are read: one that added or removed a file in a
  partition rewritten means the rows read are stale (``rewrite`` returns None, nothing
  committed, its files deleted: Delta's conflict check of a partition overwrite), one that
  changed protocol or metadata is ``Unsupported``; otherwise the next version is tried;
- at the table's checkpoint interval a checkpoint, as after every driver commit.

The files written are kept decoded (``store.warm``): the next read of those partitions
decodes nothing. A table this writer would write wrongly (``table_state.refusal``: row
tracking, change data, append-only, a feature it does not know) is ``Refused`` before any
file is written; the caller writes it with delta-rs.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from sbqueue.store import deadline, warm
from sbqueue.store.created import ENGINE
from sbqueue.store.data_files import check_nulls, split, write_file
from sbqueue.store.logfiles import commit_actions, has_commit, publish, trusted
from sbqueue.store.objects import Files, files_at
from sbqueue.store.table_state import (
    Refused,
    TableState,
    Unsupported,
    changes_table,
    committed,
    probe,
    refusal,
    table_state,
)

__all__ = ["Refused", "Unsupported", "append", "rewrite"]

_RETRIES = 50
_INDEXED = 32  # Delta's default ``delta.dataSkippingNumIndexedCols``
log = logging.getLogger("sbqueue.store")
Scope = Sequence[Mapping[str, Any]]
# Whether a commit made since the read (its actions) changed what the write read.
Touches = Callable[[list[dict[str, Any]]], bool]


def rewrite(path: str, read: tuple[int, pa.Table], scope: Scope, rows: pa.Table,
            tag: str | None) -> int | None:
    """Replace every row of the partitions in ``scope`` (each: partition column -> value)
    as of ``read`` (the version the rows were read at and its live files' add actions, as
    delta-rs flattens them) with ``rows``, in one commit; the version committed, or None
    (nothing committed) when a commit after that version added or removed a file in those
    partitions. ``Refused`` or ``Unsupported`` before anything is committed where this
    writer does not write it."""
    root = files_at(path)
    state = table_state(path, root.child("_delta_log"))
    _check_writable(path, state, rows, rewrite=True)
    names = list(state.partition_by)
    if any(set(part) != set(names) for part in scope):
        raise Unsupported(f"{path}: a rewrite's scope names every partition column {names}")
    wanted = {tuple(str(part[n]) for n in names) for part in scope}
    version, live = read
    gone = _files_in(live, names, wanted)
    gone_paths = {f["path"] for f in gone}
    written = _write(root, state, rows, names)
    outside = [f["partitionValues"] for f in written
               if tuple(f["partitionValues"][n] for n in names) not in wanted]
    if outside:
        _drop(root, written)
        raise ValueError(f"{path}: rows of partitions {outside} lie outside the rewrite's "
                         "scope; nothing was committed")
    body = _body(written, gone, version, tag, names, scope)

    def touches(actions: list[dict[str, Any]]) -> bool:
        """A commit since the read that added or removed a file of a partition rewritten
        (a remove may omit its partition values: its path tells)."""
        return any(_partition(a, names) in wanted
                   or (a.get("remove") or {}).get("path") in gone_paths for a in actions)
    # Files are deleted only where nothing was committed for certain: an error from the
    # store may come after the commit file landed (a lost response), and then they are
    # the table's; VACUUM removes them where it did not.
    committed = _publish(path, root, state, version, body, touches)
    if committed is None:
        _drop(root, written)
        return None
    warm.keep(path, state.schema, [(f["path"], f["table"]) for f in written])
    return committed


def append(path: str, records: Sequence[Mapping[str, Any]], tag: str) -> int:
    """Append ``records`` (full rows) in one blind commit carrying ``tag``; the version
    committed. It reads nothing, so it conflicts with nothing but a change of protocol or
    metadata (``Unsupported``, nothing committed)."""
    root = files_at(path)
    state = table_state(path, root.child("_delta_log"))
    if "rowTracking" in state.features:  # its appends must assign row ids: tracked.py's
        raise Refused(f"{path}: a row-tracked table is appended to by store.tracked")
    rows = pa.Table.from_pylist(list(records), state.schema)
    _check_writable(path, state, rows, rewrite=False)
    names = list(state.partition_by)
    written = _write(root, state, rows, names)
    body = _body(written, [], state.version, tag, names, None)
    committed = _publish(path, root, state, state.version, body, lambda _: False)
    if committed is None:  # nothing touches a blind append: the log was cleaned under it
        _drop(root, written)
        raise Unsupported(f"{path}: commit {state.version} is no longer in the log")
    warm.keep(path, state.schema, [(f["path"], f["table"]) for f in written])
    return committed


def _check_writable(path: str, state: TableState, rows: pa.Table, rewrite: bool) -> None:
    """``Refused`` where this writer must not write ``rows`` to the table, ``ValueError``
    for a null in a NOT NULL column."""
    reason = refusal(state, rows.schema, rewrite)
    if reason is not None:
        raise Refused(f"{path}: {reason}")
    check_nulls(rows)


def _write(root: Files, state: TableState, rows: pa.Table, names: list[str]
           ) -> list[dict[str, Any]]:
    """One file per partition of ``rows``, with the statistics Delta would index; each
    file's add action, with ``rows`` (its count) and ``table`` (its rows) besides."""
    configured = state.config.get("delta.dataSkippingStatsColumns")
    if configured:
        indexed = [c.strip() for c in configured.split(",")]
    else:
        count = int(state.config.get("delta.dataSkippingNumIndexedCols", _INDEXED))
        columns = rows.schema.names  # ``column_names`` costs ~60 us, the schema's ~5
        indexed = columns if count < 0 else columns[:count]
    if rows.num_rows == 0:
        return []
    return [{**write_file(root, part, names, indexed), "table": part}
            for part in split(rows, names)]


def _files_in(adds: pa.Table, names: list[str], wanted: set[tuple[str, ...]]
              ) -> list[dict[str, Any]]:
    """The files among ``adds`` in the partitions ``wanted``, as remove actions name them."""
    found = []
    values = adds.select([f"partition.{n}" for n in names]).to_pylist()
    for path, size, value in zip(adds.column("path").to_pylist(),
                                 adds.column("size_bytes").to_pylist(), values, strict=True):
        key = tuple(None if value[f"partition.{n}"] is None else str(value[f"partition.{n}"])
                    for n in names)
        if key in wanted:
            found.append({"path": path, "size": size,
                          "partitionValues": dict(zip(names, key, strict=True))})
    return found


def _partition(action: dict[str, Any], names: list[str]) -> tuple[str | None, ...] | None:
    """The partition values of an add or remove action (None: neither)."""
    change = action.get("add") or action.get("remove")
    if change is None:
        return None
    values = change.get("partitionValues") or {}
    return tuple(values.get(n) for n in names)


def _body(written: list[dict[str, Any]], gone: list[dict[str, Any]], read_version: int,
          tag: str | None, names: list[str], scope: Scope | None) -> str:
    now = int(time.time() * 1000)
    parameters: dict[str, Any] = {"mode": "Append" if scope is None else "Overwrite",
                                  "partitionBy": json.dumps(names)}
    if scope is not None:
        parameters["predicate"] = json.dumps([" OR ".join(
            "(" + " AND ".join(f"{k} = '{v}'" for k, v in part.items()) + ")"
            for part in scope)])
    info: dict[str, Any] = {
        "timestamp": now, "operation": "WRITE", "operationParameters": parameters,
        "readVersion": read_version, "isolationLevel": "Serializable",
        "isBlindAppend": scope is None,
        "operationMetrics": {"numFiles": str(len(written)), "numRemovedFiles": str(len(gone)),
                             "numOutputRows": str(sum(f["rows"] for f in written))},
        "engineInfo": ENGINE, "txnId": str(uuid.uuid4())}
    if tag is not None:
        info["userMetadata"] = tag
    lines: list[dict[str, Any]] = [{"commitInfo": info}]
    lines += [{"remove": {**f, "deletionTimestamp": now, "dataChange": True,
                          "extendedFileMetadata": True}} for f in gone]
    lines += [{"add": {k: v for k, v in f.items() if k not in ("rows", "table")}}
              for f in written]
    return "\n".join(json.dumps(line, separators=(",", ":")) for line in lines) + "\n"


def _publish(path: str, root: Files, state: TableState, version: int, body: str,
             touches: Touches) -> int | None:
    """Publish ``body`` as the first version after ``version`` whose commits since do not
    ``touch`` what it read; None (nothing committed) where one does, or where ``version``
    is no longer in the log (not looked at where it was seen latest lately,
    ``logfiles.trusted``: then it is there)."""
    log_dir = root.child("_delta_log")
    if not trusted(log_dir, version) and not has_commit(log_dir, version):
        return None  # cleaned up: a put after it could land unread, and what was read may
    for _ in range(_RETRIES):  # be stale: read again
        deadline.check()
        made = publish(log_dir, version + 1, body)
        if made is not None:
            committed(path, log_dir, state, version + 1, made)  # never raises
            return version + 1
        latest = probe(log_dir, version)
        for between in range(version + 1, latest + 1):
            actions = commit_actions(log_dir, between)
            if changes_table(actions):
                raise Unsupported(f"{path}: version {between} changed the table under a write")
            if touches(actions):
                return None
        version = latest
    raise Unsupported(f"{path}: no version won in {_RETRIES} tries")


def _drop(root: Files, written: list[dict[str, Any]]) -> None:
    """Delete the files of a write that committed nothing (else VACUUM would, later)."""
    for file in written:
        try:
            root.delete(file["path"])
        except OSError as exc:
            log.debug("left %s: %r", file["path"], exc)
