"""A blind append to a local row-tracking Delta table, committed on the driver: no Spark job.

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
- it is published with ``link(2)``, Delta's put-if-absent, as Spark's commits are here
  (decision 002); when another writer took the version, the row ids are drawn again after
  that commit and the next version is tried: appends never conflict.

Anything else (a table this module does not understand, a protocol or metadata change
under it) raises ``Unsupported`` before or instead of committing: the caller appends with
Spark, which is always correct.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
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

from sbqueue.store import deadline, driver
from sbqueue.store.logfiles import commit_actions, commit_file, publish

__all__ = ["CHECKPOINT_EVERY", "Unsupported", "append_tracked", "arrow_schema"]

_DOMAIN = "delta.rowTracking"
# Writer features this writer honours: a plain append satisfies each (no NOT NULL column
# is left null: the caller's rows are checked against the schema by pyarrow).
_UNDERSTOOD = {"domainMetadata", "rowTracking", "invariants", "variantType", "changeDataFeed",
               "appendOnly"}
_RETRIES = 50
CHECKPOINT_EVERY = 10  # Delta's default checkpoint interval
logger = logging.getLogger("sbqueue.store")
# Statistics are written for these types only: their Delta JSON form is exact. Strings are
# written when no value is longer than Delta's prefix length (longer ones are truncated by
# rules this writer does not repeat); timestamps not at all (Delta keeps milliseconds).
_PREFIX = 32


class Unsupported(Exception):
    """This table or this moment needs Spark's writer; nothing was committed."""


def append_tracked(path: str, table: pa.Table, partition_by: Sequence[str], tag: str,
                   stats_columns: Sequence[str], once: tuple[str, int] | None = None
                   ) -> int | None:
    """Append ``table`` (every column of the Delta schema, partition columns included) in
    one commit carrying ``tag``; the version committed. ``once``: an application id and
    version, as Spark's ``txnAppId`` / ``txnVersion`` (Delta's ``txn`` action): when the
    table holds that id at that version or a later one, nothing is written and None is
    returned."""
    root = Path(path)
    log = root / "_delta_log"
    version = _latest(log)
    if once is not None:
        seen = driver.latest(path)
        stored = seen.transaction_version(once[0])
        if stored is not None and stored >= once[1]:
            return None
        version = seen.version()  # commits after it are checked for ``once`` below
    _check_protocol(log)
    files = [_write_file(root, part, partition_by, stats_columns)
             for part in _split(table, partition_by)]
    for _ in range(_RETRIES):
        high = _high_water_mark(log, version)
        body = _commit(files, version + 1, high, tag, once)
        deadline.check()
        if publish(log, version + 1, body):
            _checkpoint(root, version + 1)  # never raises: the append is committed
            return version + 1
        latest = _latest(log)
        for between in range(version + 1, latest + 1):  # every commit we lost to
            actions = commit_actions(log, between)
            _check_unchanged(log, between, actions)
            if once is not None and any(_carries(a.get("txn"), once) for a in actions):
                return None  # the same batch, committed by someone else
        version = latest
    raise Unsupported(f"{path}: no version won in {_RETRIES} tries")


def _check_unchanged(log: Path, version: int, actions: list[dict[str, Any]]) -> None:
    """Refuse when commit ``version`` (its ``actions``), made under this append, changed
    the table's protocol or metadata."""
    if any("protocol" in a or "metaData" in a for a in actions):
        raise Unsupported(f"{log}: version {version} changed the table under an append")


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


def _checkpoint(root: Path, version: int) -> None:
    """Every ``CHECKPOINT_EVERY`` versions, a checkpoint (delta-rs writes it, row-tracking
    domain and row ids included), as Spark's own commits do: else readers would replay an
    ever longer log when most commits are made here."""
    if version % CHECKPOINT_EVERY:
        return
    from deltalake import DeltaTable

    try:
        DeltaTable(str(root), version=version).create_checkpoint()
    except Exception as exc:  # the append is committed whatever happens here
        logger.debug("no checkpoint at %s of %s: %r", version, root, exc)


def _latest(log: Path) -> int:
    versions = [int(n[:20]) for n in os.listdir(log)
                if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    if not versions:
        raise Unsupported(f"{log}: no commit")
    return max(versions)


def _check_protocol(log: Path) -> None:
    """Refuse a table whose writer features this module does not honour (read from this
    thread's table of it, brought up to date: no full log replay per send)."""
    protocol = driver.latest(str(log.parent)).protocol()
    features = set(protocol.writer_features or [])
    if protocol.min_writer_version < 7 or not features <= _UNDERSTOOD:
        raise Unsupported(f"{log}: writer features {sorted(features - _UNDERSTOOD)}")


def _high_water_mark(log: Path, version: int) -> int:
    """The highest row id assigned up to ``version``: the newest commit of the row-tracking
    domain, else the newest checkpoint's (found by listing the log, not by the optional
    ``_last_checkpoint`` hint); -1 only when every commit from version 0 was read and none
    assigned one. Anything less certain (a commit missing, a checkpoint without the domain)
    is ``Unsupported``: a wrong mark would give two rows one id."""
    floor = max((int(n.name[:20]) for n in log.glob("*.checkpoint*.parquet")
                 if n.name[:20].isdigit() and int(n.name[:20]) <= version), default=-1)
    for v in range(version, floor, -1):
        if not commit_file(log, v).exists():
            raise Unsupported(f"{log}: commit {v} is not in the log")
        for action in commit_actions(log, v):
            domain = action.get("domainMetadata")
            if domain and domain.get("domain") == _DOMAIN and not domain.get("removed"):
                return int(json.loads(domain["configuration"])["rowIdHighWaterMark"])
    if floor < 0:
        return -1
    return _checkpoint_mark(log, floor)


def _checkpoint_mark(log: Path, version: int) -> int:
    parts = sorted(log.glob(f"{version:020d}.checkpoint*.parquet"))
    if not parts:
        raise Unsupported(f"{log}: checkpoint {version} not found")
    for part in parts:
        rows = pq.read_table(part, columns=["domainMetadata"]).column(0).to_pylist()
        for domain in rows:
            if domain and domain.get("domain") == _DOMAIN and not domain.get("removed"):
                return int(json.loads(domain["configuration"])["rowIdHighWaterMark"])
    raise Unsupported(f"{log}: checkpoint {version} holds no row-id high-water mark")


def _split(table: pa.Table, partition_by: Sequence[str]) -> list[pa.Table]:
    """The rows of each partition value, in their order."""
    keys = list(zip(*[table.column(c).to_pylist() for c in partition_by], strict=True))
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return [table.take(pa.array(rows, pa.int64())) for rows in groups.values()]


def _write_file(root: Path, part: pa.Table, partition_by: Sequence[str],
                stats_columns: Sequence[str]) -> dict[str, Any]:
    values = {c: part.column(c)[0].as_py() for c in partition_by}
    folder = "/".join(f"{c}={values[c]}" for c in partition_by)
    name = f"{folder}/part-00000-{uuid.uuid4()}.c000.zstd.parquet"
    data = part.drop_columns(list(partition_by))
    (root / folder).mkdir(parents=True, exist_ok=True)
    pq.write_table(data, root / name, compression="zstd")
    return {
        "path": name,
        "partitionValues": {c: str(values[c]) for c in partition_by},
        "size": os.path.getsize(root / name),
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
