"""An entity's tables created on the driver are the tables Spark's CREATE TABLE makes
(decision 026): the same protocol, schema, partition columns and properties."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sbqueue.engine.schema import (
    INBOX_PROPERTIES,
    INBOX_PROTOCOL,
    INBOX_SCHEMA,
    LEDGER_PROPERTIES,
    LEDGER_PROTOCOL,
    LEDGER_SCHEMA,
)
from sbqueue.store.created import create_here
from sbqueue.store.delta import create_table

pytestmark = pytest.mark.spark

TABLES = {
    "inbox": (INBOX_SCHEMA, ["partition_id", "segment"], INBOX_PROPERTIES, INBOX_PROTOCOL),
    "ledger": (LEDGER_SCHEMA, ["partition_id", "lane"], LEDGER_PROPERTIES, LEDGER_PROTOCOL),
}


def _first(path: Path) -> dict[str, Any]:
    lines = (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    actions = {k: v for line in lines for k, v in json.loads(line).items()}
    meta = actions["metaData"]
    config = {k: re.sub(r"[0-9a-f-]{36}$", "<uuid>", v)
              for k, v in meta["configuration"].items()}
    protocol = {k: sorted(v) if isinstance(v, list) else v
                for k, v in actions["protocol"].items()}
    crc = json.loads((path / "_delta_log" / f"{0:020d}.crc").read_text())
    assert crc.pop("metadata") == meta and crc.pop("protocol") == actions["protocol"]
    assert crc.pop("txnId") == actions["commitInfo"]["txnId"]
    crc.pop("fileSizeHistogram", None)  # left out on purpose (decision 026): optional
    return {"protocol": protocol, "schema": json.loads(meta["schemaString"]),
            "partitions": meta["partitionColumns"], "configuration": config, "checksum": crc}


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_a_table_made_here_is_the_one_spark_makes(spark, tmp_path, kind) -> None:
    schema, parts, props, protocol = TABLES[kind]
    create_table(spark, str(tmp_path / "spark"), schema, parts, props)

    made = create_here(str(tmp_path / "here"), schema, parts, props, protocol)
    again = create_here(str(tmp_path / "here"), schema, parts, props, protocol)

    assert (made, again) == (True, False)  # the second creator finds the first's table
    assert _first(tmp_path / "here") == _first(tmp_path / "spark")


def test_spark_writes_and_reads_a_table_made_here(spark, tmp_path) -> None:
    schema, parts, props, protocol = TABLES["inbox"]
    path = str(tmp_path / "inbox")
    create_here(path, schema, parts, props, protocol)
    keys = {"partition_id": "0", "segment": "0L", "send_id": "'s'", "batch_index": "0L"}
    row = spark.range(1).selectExpr(*[f"CAST({keys.get(f.name, 'NULL')} AS "
                                      f"{f.dataType.simpleString()}) AS `{f.name}`"
                                      for f in schema.fields])
    row.write.format("delta").mode("append").save(path)

    [got] = spark.read.format("delta").load(path).select(
        "send_id", "_metadata.row_commit_version", "_metadata.row_id").collect()

    assert (got[0], got[1], got[2]) == ("s", 1, 0)  # row tracking is on from the start


def test_a_session_with_table_defaults_leaves_the_create_to_spark(spark, tmp_path) -> None:
    """Spark applies the session's default table properties; a driver-made table would
    not, so such a session creates with Spark (decision 026)."""
    from sbqueue.engine.ledger import Ledger

    key = "spark.databricks.delta.properties.defaults.logRetentionDuration"
    spark.conf.set(key, "interval 31 days")
    try:
        Ledger(spark, str(tmp_path / "ledger")).create_empty()
    finally:
        spark.conf.unset(key)
    lines = (tmp_path / "ledger" / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    actions = {k: v for line in lines for k, v in json.loads(line).items()}
    assert actions["commitInfo"]["engineInfo"].startswith("Apache-Spark")
    assert actions["metaData"]["configuration"]["delta.logRetentionDuration"] == (
        "interval 31 days")
