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
(``_State``, loaded with delta-rs once per process) and brought up to date by reading the
commits made since, file by file; the row-id mark is read from the newest commit back to
the checkpoint the ``_last_checkpoint`` hint names (a log without one is listed).

Anything else raises ``Unsupported`` before or instead of committing: ``Refused`` for a
table this writer does not write (a writer feature it does not know, a column invariant,
a schema other than the rows'), plain ``Unsupported`` for a moment (a protocol or metadata
change under the append); the caller appends with Spark, which is always correct.
"""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
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

from sbqueue.location import driver_uri
from sbqueue.store import deadline, driver
from sbqueue.store.logfiles import commit_actions, commit_name, has_commit, publish
from sbqueue.store.objects import Files, files_at, storage_options

__all__ = ["CHECKPOINT_EVERY", "Refused", "Unsupported", "append_tracked", "arrow_schema"]

_DOMAIN = "delta.rowTracking"
# Writer features this writer honours: a plain append of rows that match the table's schema
# (checked, ``_refusal``) and hold no null in a NOT NULL column (checked, ``_check_nulls``)
# satisfies each; a column invariant (``delta.invariants``) is refused, not evaluated.
_UNDERSTOOD = {"domainMetadata", "rowTracking", "invariants", "variantType", "changeDataFeed",
               "appendOnly"}
_RETRIES = 50
CHECKPOINT_EVERY = 10  # Delta's default ``delta.checkpointInterval``
logger = logging.getLogger("sbqueue.store")
# Statistics are written for these types only: their Delta JSON form is exact. Strings are
# written when no value is longer than Delta's prefix length (longer ones are truncated by
# rules this writer does not repeat); timestamps not at all (Delta keeps milliseconds).
_PREFIX = 32


class Unsupported(Exception):
    """This table or this moment needs Spark's writer; nothing was committed."""


class Refused(Unsupported):
    """This table needs Spark's writer for as long as it stays as it is (a writer feature,
    a column invariant or a schema this writer does not write); nothing was committed."""


@dataclass(frozen=True)
class _State:
    """What an append checks a table against, as of ``version``: its writer protocol,
    schema (Arrow, as delta-rs maps it) and properties. ``identity`` is that version's
    commit file's (inode, or S3 entity tag): a table deleted and made again at the same
    path differs."""

    version: int
    identity: str | None
    writer_version: int
    features: frozenset[str]
    invariants: bool
    schema: pa.Schema
    config: Mapping[str, str]


_states: dict[str, _State] = {}  # by log folder: this process's newest state of each table


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
    state = _state(path, log)
    reason = _refusal(state, table.schema)
    if reason is not None:
        raise Refused(f"{path}: {reason}")
    _check_nulls(table)
    # with ``once``, commits after the version it was looked up at are checked for it below
    version = state.version if seen is None else min(seen.version(), state.version)
    files = [_write_file(root, part, partition_by, stats_columns)
             for part in _split(table, partition_by)]
    for _ in range(_RETRIES):
        high = _high_water_mark(log, version)
        body = _commit(files, version + 1, high, tag, once)
        deadline.check()
        if publish(log, version + 1, body):
            try:  # committed: nothing after this may raise (a retry would send twice)
                _remember(log, state, version + 1)
            except Exception as exc:
                logger.debug("state of %s not kept after %s: %r", path, version + 1, exc)
            _checkpoint(path, log, version + 1, state.config)  # never raises: committed
            return version + 1
        latest = _probe(log, version)
        for between in range(version + 1, latest + 1):  # every commit we lost to
            actions = commit_actions(log, between)
            _check_unchanged(log, between, actions)
            if once is not None and any(_carries(a.get("txn"), once) for a in actions):
                return None  # the same batch, committed by someone else
        version = latest
    raise Unsupported(f"{path}: no version won in {_RETRIES} tries")


def _check_unchanged(log: Files, version: int, actions: list[dict[str, Any]]) -> None:
    """Refuse when commit ``version`` (its ``actions``), made under this append, changed
    the table's protocol or metadata."""
    if _changes_table(actions):
        raise Unsupported(f"{log.where}: version {version} changed the table under an append")


def _changes_table(actions: list[dict[str, Any]]) -> bool:
    return any("protocol" in a or "metaData" in a for a in actions)


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
    """The Arrow schema a Spark table schema is written with."""
    return pa.schema([pa.field(f.name, _arrow_type(f.dataType), nullable=f.nullable)
                      for f in schema.fields])


def _checkpoint(path: str, log: Files, version: int, config: Mapping[str, str]) -> None:
    """At the table's checkpoint interval, a checkpoint (delta-rs writes it, row-tracking
    domain and row ids included), then the expired log files removed, as Spark's own
    commits do: else readers would replay, and every listing of the log read, an ever
    longer log when most commits are made here."""
    if version % _interval(config):
        return
    from deltalake import DeltaTable

    try:
        table = DeltaTable(driver_uri(path), version=version,
                           storage_options=storage_options(path))
        table.create_checkpoint()
        if config.get("delta.enableExpiredLogCleanup", "true").strip().lower() != "false":
            table.cleanup_metadata()  # by ``delta.logRetentionDuration`` (30 days unset)
            _drop_lone_checksums(log)
    except Exception as exc:  # the append is committed whatever happens here
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


def _state(path: str, log: Files) -> _State:
    """The table's state at its latest version: this process's kept state brought forward
    by the commits made since (read one by one, no listing), loaded again with delta-rs
    where one of them changed protocol or metadata, or where none is kept."""
    known = _states.get(log.where)
    if known is None or log.identity(commit_name(known.version)) != known.identity:
        return _load(path, log)
    version = known.version
    while has_commit(log, version + 1):
        version += 1
        if _changes_table(commit_actions(log, version)):
            return _load(path, log)
    return known if version == known.version else _remember(log, known, version)


def _load(path: str, log: Files) -> _State:
    """The state as delta-rs reads it (this thread's table of it, brought up to date)."""
    table = driver.latest(path)
    protocol = table.protocol()
    version = table.version()
    state = _State(version, log.identity(commit_name(version)), protocol.min_writer_version,
                   frozenset(protocol.writer_features or []),
                   "delta.invariants" in table.schema().to_json(),
                   pa.schema(table.schema().to_arrow()),
                   dict(table.metadata().configuration))
    _states[log.where] = state
    return state


def _remember(log: Files, state: _State, version: int) -> _State:
    """``state`` as of ``version`` (no protocol or metadata change up to it), kept."""
    newer = replace(state, version=version, identity=log.identity(commit_name(version)))
    kept = _states.get(log.where)
    if kept is None or kept.version <= version:
        _states[log.where] = newer
    return newer


def _probe(log: Files, version: int) -> int:
    """The latest version, found from ``version`` (committed) forward, file by file."""
    while has_commit(log, version + 1):
        version += 1
    return version


def _refusal(state: _State, schema: pa.Schema) -> str | None:
    """Why this writer must not append rows of ``schema`` to the table; None: it may."""
    unknown = sorted(state.features - _UNDERSTOOD)
    if state.writer_version < 7 or unknown:
        return (f"writer features {unknown} (writer version {state.writer_version}) are not "
                "written by sbqueue's driver writer")
    if state.invariants:
        return "a column invariant (delta.invariants) is not checked by sbqueue's writer"
    theirs, ours = _shape(state.schema), _shape(schema)
    if theirs != ours:
        differ = [n for n in dict.fromkeys([*theirs, *ours]) if theirs.get(n) != ours.get(n)]
        return (f"the table's schema differs from the rows' in column(s) {differ} (made by "
                "another sbqueue version, or altered)")
    return None


def _shape(schema: pa.Schema) -> dict[str, Any]:
    """Each column's type and nullability, in order, as both sides can state them: a
    struct's fields by name (Parquet's are matched by name, and delta-rs orders a
    VARIANT's two fields otherwise than Spark), a list's element without its name."""
    def kind(t: pa.DataType) -> Any:
        if pa.types.is_struct(t):
            return ("struct", tuple(sorted((f.name, kind(f.type), f.nullable) for f in t)))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return ("list", kind(t.value_type), t.value_field.nullable)
        return str(t)
    return {f.name: (kind(f.type), f.nullable) for f in schema}


def _check_nulls(table: pa.Table) -> None:
    """``ValueError`` naming the first NOT NULL column (or field of one) that holds a null
    where its parent is set: raised before any file is written. pyarrow builds such
    tables without a word (apache/arrow#43145), and a partition column never reaches
    its Parquet writer, which would check the others."""
    for field in table.schema:
        for chunk in table.column(field.name).chunks:
            found = _null_in(chunk, field, field.name)
            if found is not None:
                raise ValueError(f"column {found} is NOT NULL, but a row holds null; "
                                 "nothing was written")


def _null_in(array: pa.Array, field: pa.Field, name: str) -> str | None:
    if not field.nullable and array.null_count:
        return name
    if pa.types.is_struct(field.type):
        present = array.filter(pc.is_valid(array)) if array.null_count else array
        for index, child in enumerate(field.type):
            found = _null_in(present.field(index), child, f"{name}.{child.name}")
            if found is not None:
                return found
    elif pa.types.is_list(field.type):
        return _null_in(array.flatten(), field.type.value_field, f"{name}.element")
    return None


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
        for action in commit_actions(log, v):
            domain = action.get("domainMetadata")
            if domain and domain.get("domain") == _DOMAIN and not domain.get("removed"):
                return int(json.loads(domain["configuration"])["rowIdHighWaterMark"])
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


def _split(table: pa.Table, partition_by: Sequence[str]) -> list[pa.Table]:
    """The rows of each partition value, in their order."""
    keys = list(zip(*[table.column(c).to_pylist() for c in partition_by], strict=True))
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return [table.take(pa.array(rows, pa.int64())) for rows in groups.values()]


def _write_file(root: Files, part: pa.Table, partition_by: Sequence[str],
                stats_columns: Sequence[str]) -> dict[str, Any]:
    values = {c: part.column(c)[0].as_py() for c in partition_by}
    folder = "/".join(f"{c}={values[c]}" for c in partition_by)
    name = f"{folder}/part-00000-{uuid.uuid4()}.c000.zstd.parquet"
    data = part.drop_columns(list(partition_by))
    sink = io.BytesIO()
    pq.write_table(data, sink, compression="zstd")
    root.put(name, sink.getvalue())
    return {
        "path": name,
        "partitionValues": {c: str(values[c]) for c in partition_by},
        "size": len(sink.getvalue()),
        "modificationTime": int(time.time() * 1000),
        "dataChange": True,
        "stats": json.dumps(_stats(data, stats_columns), separators=(",", ":")),
        "rows": part.num_rows,
    }


def _stats(data: pa.Table, columns: Sequence[str]) -> dict[str, Any]:
    """``numRecords``, and exact min / max / null counts of the statistics columns whose
    JSON form is exact (integers, short strings)."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in columns:
        if name not in data.column_names:
            continue
        column = data.column(name)
        kind = column.type
        present = [v for v in column.to_pylist() if v is not None]
        if pa.types.is_integer(kind) or (pa.types.is_string(kind)
                                         and all(len(v) <= _PREFIX for v in present)):
            nulls[name] = column.null_count
            if present:
                low[name], high[name] = min(present), max(present)
    return {"numRecords": data.num_rows, "minValues": low, "maxValues": high,
            "nullCount": nulls}


def _carries(txn: dict[str, Any] | None, once: tuple[str, int]) -> bool:
    """Whether a ``txn`` action records ``once``'s application at its version or later."""
    return txn is not None and txn.get("appId") == once[0] and int(txn["version"]) >= once[1]


def _commit(files: list[dict[str, Any]], version: int, high: int, tag: str,
            once: tuple[str, int] | None = None) -> str:
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
    return "\n".join(json.dumps(line, separators=(",", ":")) for line in lines) + "\n"
