"""A blind append to a row-tracking Delta table, committed on the driver: no Spark job.

Why (decision 015): a send is a blind append to the inbox, which has Delta row tracking on
(its rows' commit versions order the entity; a topic's sequence numbers are row ids). A
Spark append to a row-tracking table costs two jobs (the row-id high-water mark is read
from a reconstructed snapshot), 3-4x a plain append; delta-rs reads such tables but
refuses to write them (``Unsupported table features required: [DomainMetadata,
RowTracking]``). A blind append is the simplest commit Delta has, so this module makes
exactly that one and nothing else:

- the rows of each partition go to one Parquet file (pyarrow), written before the commit;
- the commit is ``commitInfo`` (with the caller's tag as ``userMetadata``), one ``add``
  per file with ``numRecords`` statistics, ``baseRowId`` and ``defaultRowCommitVersion``,
  and the ``delta.rowTracking`` domain's new high-water mark;
- it is published only where no commit file is (``store.objects``: ``link(2)`` in a local
  folder, as Spark's commits are there, decision 002; a conditional write on S3, as
  delta-rs's are, decision 040); when another writer took the version, the row ids are
  drawn again after that commit and the next version is tried: appends never conflict;
- at the table's ``delta.checkpointInterval`` a checkpoint (delta-rs), then the expired
  log files are removed (``delta.logRetentionDuration``), as Spark does after its own,
  unless ``delta.enableExpiredLogCleanup`` is false.

Between checkpoints an append lists nothing, so its cost does not grow with the log
(decision 031): the table's protocol, schema and properties are kept per table
(``TableState``, loaded with delta-rs once per process) and brought up to date by reading the
commits made since, file by file; the row-id mark is read from the newest commit back to
the checkpoint the ``_last_checkpoint`` hint names (a log without one is listed).

Anything else raises ``Unsupported`` before or instead of committing: ``Refused`` for a
table this writer does not write (a writer feature it does not know, a column invariant,
a schema other than the rows'), plain ``Unsupported`` for a moment (a protocol or metadata
change under the append); the caller appends with Spark, which is always correct.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
    VariantType,
)

from sbqueue.store import deadline, driver, warm
from sbqueue.store.data_files import check_nulls, split, write_file
from sbqueue.store.logfiles import commit_actions, has_commit, publish
from sbqueue.store.memo import ByIdentity
from sbqueue.store.objects import Files, files_at
from sbqueue.store.table_state import (
    CHECKPOINT_EVERY,
    Refused,
    TableState,
    Unsupported,
    changes_table,
    committed,
    probe,
    refusal,
    table_state,
)

__all__ = ["CHECKPOINT_EVERY", "Refused", "Unsupported", "append_tracked", "arrow_schema"]

_DOMAIN = "delta.rowTracking"
_RETRIES = 50


def append_tracked(path: str, table: pa.Table, partition_by: Sequence[str], tag: str,
                   stats_columns: Sequence[str], once: tuple[str, int] | None = None
                   ) -> int | None:
    """Append ``table`` (every column of the Delta schema, partition columns included) in
    one commit carrying ``tag``; the version committed. ``once``: an application id and
    version, as Spark's ``txnAppId`` / ``txnVersion`` (Delta's ``txn`` action): when the
    table holds that id at that version or a later one, nothing is written and None is
    returned. ``Refused``, ``Unsupported``, or ``ValueError`` for a null in a NOT NULL
    column: raised before any file is written."""
    root = files_at(path)
    log = root.child("_delta_log")
    seen = None if once is None else driver.latest(path)
    if seen is not None and once is not None:
        stored = seen.transaction_version(once[0])
        if stored is not None and stored >= once[1]:
            return None
    state = table_state(path, log)
    reason = refusal(state, table.schema) or _untracked(state)
    if reason is not None:
        raise Refused(f"{path}: {reason}")
    check_nulls(table)
    # with ``once``, commits after the version it was looked up at are checked for it below
    version = state.version if seen is None else min(seen.version(), state.version)
    parts = split(table, partition_by)
    files = [write_file(root, part, partition_by, stats_columns) for part in parts]
    # The mark as of ``version``, where this process knows it (its own last commit, or the
    # commits it lost to): else read from the log (on S3: a hint, a listing, a commit).
    known = state.high_water if version == state.version else None
    for _ in range(_RETRIES):
        high = _high_water_mark(log, version) if known is None else known
        body, mark = _commit(files, version + 1, high, tag, once)
        deadline.check()
        made = publish(log, version + 1, body)
        if made is not None:  # never raises (a retry would send twice):
            committed(path, log, state, version + 1, made, mark)
            warm.keep(path, state.schema, [(f["path"], part) for f, part in zip(
                files, parts, strict=True)])  # the receive that follows decodes nothing
            return version + 1
        latest = probe(log, version)
        known = None
        for between in range(version + 1, latest + 1):  # every commit we lost to
            actions = commit_actions(log, between)
            _check_unchanged(log, between, actions)
            if once is not None and any(_carries(a.get("txn"), once) for a in actions):
                return None  # the same batch, committed by someone else
            known = _mark_in(actions, known)
        version = latest
    raise Unsupported(f"{path}: no version won in {_RETRIES} tries")


def _mark_in(actions: list[dict[str, Any]], before: int | None) -> int | None:
    """The row-id high-water mark a commit's ``actions`` set, else ``before`` (the mark
    as of the commit before it, None where unknown)."""
    for action in actions:
        domain = action.get("domainMetadata")
        if domain and domain.get("domain") == _DOMAIN and not domain.get("removed"):
            return int(json.loads(domain["configuration"])["rowIdHighWaterMark"])
    return before


def _untracked(state: TableState) -> str | None:
    """Why a row-tracked append must not be made to the table: row ids need writer
    version 7 and its row-tracking feature."""
    if state.writer_version < 7 or "rowTracking" not in state.features:
        return (f"writer features {sorted(state.features)} (writer version "
                f"{state.writer_version}) hold no row tracking for sbqueue's driver writer")
    return None


def _check_unchanged(log: Files, version: int, actions: list[dict[str, Any]]) -> None:
    """Refuse when commit ``version`` (its ``actions``), made under this append, changed
    the table's protocol or metadata."""
    if changes_table(actions):
        raise Unsupported(f"{log.where}: version {version} changed the table under an append")


def _arrow_type(kind: DataType) -> pa.DataType:
    simple: dict[type, pa.DataType] = {
        IntegerType: pa.int32(), LongType: pa.int64(), StringType: pa.string(),
        BinaryType: pa.binary(), TimestampType: pa.timestamp("us", tz="UTC"),
        # Spark's Parquet form of a VARIANT: its value and metadata bytes.
        VariantType: pa.struct([pa.field("value", pa.binary(), nullable=False),
                                pa.field("metadata", pa.binary(), nullable=False)])}
    if isinstance(kind, ArrayType):
        return pa.list_(_arrow_type(kind.elementType))
    if type(kind) not in simple:
        raise Unsupported(f"no Parquet form here for {kind.simpleString()}")
    return simple[type(kind)]


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema a Spark table schema is written with; made once per schema object
    (the same one for every send: the inbox's)."""
    return _arrow_schemas.get(schema, _arrow_of)


def _arrow_of(schema: StructType) -> pa.Schema:
    return pa.schema([pa.field(f.name, _arrow_type(f.dataType), nullable=f.nullable)
                      for f in schema.fields])


_arrow_schemas: ByIdentity[StructType, pa.Schema] = ByIdentity()


def _high_water_mark(log: Files, version: int) -> int:
    """The highest row id assigned up to ``version``: the newest commit of the row-tracking
    domain, else the newest checkpoint's (the one the ``_last_checkpoint`` hint names
    where its files are there, else found by listing the log); -1 only when every commit
    from version 0 was read and none assigned one. Anything less certain (a commit
    missing, a checkpoint without the domain) is ``Unsupported``: a wrong mark would give
    two rows one id."""
    floor, parts = _floor(log, version)
    for v in range(version, floor, -1):
        if not has_commit(log, v):
            raise Unsupported(f"{log.where}: commit {v} is not in the log")
        mark = _mark_in(commit_actions(log, v), None)
        if mark is not None:
            return mark
    if floor < 0:
        return -1
    return _checkpoint_mark(log, floor, parts)


def _floor(log: Files, version: int) -> tuple[int, list[str]]:
    """The newest checkpoint at or before ``version`` and its files ((-1, []): none)."""
    try:
        hint = json.loads(log.read("_last_checkpoint").decode("utf-8"))
        at, count = int(hint["version"]), int(hint.get("parts") or 1)
    except (OSError, ValueError, KeyError, TypeError):
        at, count = -1, 0
    name = f"{at:020d}.checkpoint"
    parts = [f"{name}.parquet"] if count == 1 else [
        f"{name}.{i:010d}.{count:010d}.parquet" for i in range(1, count + 1)]
    if 0 <= at <= version and all(log.exists(p) for p in parts):
        return at, parts
    try:
        listed = log.names()
    except FileNotFoundError:
        listed = []
    found = [n for n in listed if ".checkpoint" in n and n.endswith(".parquet")
             and n[:20].isdigit() and int(n[:20]) <= version]
    at = max((int(n[:20]) for n in found), default=-1)
    return at, sorted(n for n in found if int(n[:20]) == at)


def _checkpoint_mark(log: Files, version: int, parts: list[str]) -> int:
    if not parts:
        raise Unsupported(f"{log.where}: checkpoint {version} not found")
    for part in parts:
        rows = pq.read_table(log.source(part), columns=["domainMetadata"]).column(0).to_pylist()
        for domain in rows:
            if domain and domain.get("domain") == _DOMAIN and not domain.get("removed"):
                return int(json.loads(domain["configuration"])["rowIdHighWaterMark"])
    raise Unsupported(f"{log.where}: checkpoint {version} holds no row-id high-water mark")


def _carries(txn: dict[str, Any] | None, once: tuple[str, int]) -> bool:
    """Whether a ``txn`` action records ``once``'s application at its version or later."""
    return txn is not None and txn.get("appId") == once[0] and int(txn["version"]) >= once[1]


def _commit(files: list[dict[str, Any]], version: int, high: int, tag: str,
            once: tuple[str, int] | None = None) -> tuple[str, int]:
    lines: list[dict[str, Any]] = [{"commitInfo": {
        "timestamp": int(time.time() * 1000), "operation": "WRITE",
        "operationParameters": {"mode": "Append", "partitionBy": "[]"},
        "readVersion": version - 1, "isolationLevel": "Serializable", "isBlindAppend": True,
        "operationMetrics": {"numFiles": str(len(files)),
                             "numOutputRows": str(sum(f["rows"] for f in files))},
        "userMetadata": tag, "engineInfo": "sbqueue-driver", "txnId": str(uuid.uuid4())}}]
    for file in files:
        add = {k: v for k, v in file.items() if k != "rows"}
        add["baseRowId"] = high + 1
        add["defaultRowCommitVersion"] = version
        high += file["rows"]
        lines.append({"add": add})
    if once is not None:
        lines.append({"txn": {"appId": once[0], "version": once[1],
                              "lastUpdated": int(time.time() * 1000)}})
    lines.append({"domainMetadata": {"domain": _DOMAIN, "configuration": json.dumps(
        {"rowIdHighWaterMark": high, "domainName": _DOMAIN}, separators=(",", ":")),
        "removed": False}})
    body = "\n".join(json.dumps(line, separators=(",", ":")) for line in lines) + "\n"
    return body, high  # the commit, and the mark it sets
