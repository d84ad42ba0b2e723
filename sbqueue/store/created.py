"""An empty Delta table created on the driver: its first commit, as Spark writes it.

Why (decision 026): ``CREATE TABLE`` through Spark costs a second or more per table (the
statement's analysis, a snapshot of the new table, its checksum), and a queue has two
tables: ``create_queue`` took 1.1 s on an idle JVM with them, 0.22 s without. The first
commit of an empty table holds no data: a ``commitInfo``, the ``metaData`` (schema,
partition columns, properties) and the ``protocol``; with it, the checksum file of that
state, from which Spark reads protocol and metadata without reconstructing a snapshot.
This module writes exactly those into a local folder or an S3 prefix, each put only where
none is (``store.logfiles``), so concurrent creators agree on one table: the first one's.

The protocol is the caller's, stated beside the table's properties (``engine.schema``),
because Delta derives it from them by rules this module does not repeat; an integration
test compares both against what Spark's ``CREATE TABLE`` writes, so a new Delta version
that derives another protocol fails there, not in a user's table.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql.types import StructType

from sbqueue.store.logfiles import commit_name, log_files, publish
from sbqueue.store.objects import Files

__all__ = ["ENGINE", "create_here"]

ENGINE = "sbqueue-driver"  # the commitInfo's engineInfo of commits made here
_ROW_TRACKING = "delta.enableRowTracking"
_TXN_RETENTION = "delta.setTransactionRetentionDuration"
# Row tracking names the columns that would hold materialized row ids and commit versions;
# Spark draws them at create (a random suffix each), so this does too.
_MATERIALIZED = {"delta.rowTracking.materializedRowCommitVersionColumnName":
                 "_row-commit-version-col-",
                 "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-"}
log = logging.getLogger("sbqueue.store")


def create_here(path: str, schema: StructType, partition_by: Sequence[str],
                properties: Mapping[str, str], protocol: Mapping[str, Any]) -> bool:
    """Create the empty table at ``path`` unless a table is there; True if this call
    created it, False if another had (its table stands, whatever it was made with)."""
    log_dir = log_files(path)
    log_dir.prepare()
    if any(n.endswith(".json") for n in log_dir.names()):
        _finish(log_dir)
        return False
    actions = _first_actions(schema, partition_by, properties, protocol)
    if not publish(log_dir, 0, _lines(actions)):
        return False
    _write_checksum(log_dir, actions)
    return True


def _first_actions(schema: StructType, partition_by: Sequence[str],
                   properties: Mapping[str, str], protocol: Mapping[str, Any]
                   ) -> list[dict[str, Any]]:
    """Version 0 of an empty table: commitInfo, metaData, protocol."""
    now = int(time.time() * 1000)
    config = dict(properties)
    if config.get(_ROW_TRACKING, "").lower() == "true":
        config.update({key: f"{prefix}{uuid.uuid4()}" for key, prefix in _MATERIALIZED.items()})
    info = {"timestamp": now, "operation": "CREATE TABLE", "operationParameters": {
        "partitionBy": json.dumps(list(partition_by), separators=(",", ":")),
        "clusterBy": "[]", "description": None, "isManaged": "false",
        "properties": json.dumps(config, separators=(",", ":"))},
        "isolationLevel": "Serializable", "isBlindAppend": True, "operationMetrics": {},
        "engineInfo": ENGINE, "txnId": str(uuid.uuid4())}
    meta = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
            "schemaString": schema.json(), "partitionColumns": list(partition_by),
            "configuration": config, "createdTime": now}
    return [{"commitInfo": info}, {"metaData": meta}, {"protocol": _plain(protocol)}]


def _plain(protocol: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in protocol.items()}


def _lines(actions: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n"


def _write_checksum(log_dir: Files, actions: list[dict[str, Any]]) -> None:
    """Version 0's checksum: a table without files, its metadata and protocol. Optional
    in Delta, so a failure to write it is logged, not raised (the table stands)."""
    found = {k: v for action in actions for k, v in action.items()}
    state: dict[str, Any] = {
        "txnId": found["commitInfo"]["txnId"], "tableSizeBytes": 0, "numFiles": 0,
        "numMetadata": 1, "numProtocol": 1, "setTransactions": [], "domainMetadata": [],
        "metadata": found["metaData"], "protocol": found["protocol"], "allFiles": []}
    if _TXN_RETENTION in found["metaData"]["configuration"]:
        del state["setTransactions"]  # they expire by time, so Spark leaves them out too
    try:
        log_dir.put_if_absent(f"{0:020d}.crc", json.dumps(state, separators=(",", ":")).encode())
    except OSError as exc:
        log.debug("no checksum for %s: %r", log_dir.where, exc)


def _finish(log_dir: Files) -> None:
    """Write the checksum a creator made here did not live to write (decision 020: the
    next create finishes what a crash left); a table made elsewhere is left as it is."""
    if log_dir.exists(f"{0:020d}.crc") or not log_dir.exists(commit_name(0)):
        return
    try:
        text = log_dir.read(commit_name(0)).decode("utf-8")
        actions = [json.loads(line) for line in text.splitlines() if line]
    except (OSError, ValueError):
        return
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    if info.get("engineInfo") == ENGINE:
        _write_checksum(log_dir, actions)
