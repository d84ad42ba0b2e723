"""The messages a receive decided on the driver hands out, with their bodies: read on
the driver by locator where the inbox is local, else joined by Spark from a frame of the
handed rows (``engine.receive.attempt.with_bodies``)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from sbqueue.engine.columns import values_frame
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.receive.attempt import OUTPUT_COLUMNS, STATE_OUT
from sbqueue.engine.schema import LEDGER_TYPES, LOCATOR, MESSAGE_FIELDS

__all__ = ["HANDED_SCHEMA", "MESSAGE_COLUMNS", "handed_frame", "messages_here"]

MESSAGE_COLUMNS = [f.name for f in MESSAGE_FIELDS]
HANDED_SCHEMA = StructType([
    *[StructField(c, LEDGER_TYPES[c]) for c in (*LOCATOR, "sequence_number")],
    *[StructField(c, LEDGER_TYPES[c]) for c in STATE_OUT]])


def _with_messages(inbox: Inbox, handed: list[dict[str, Any]]) -> bool:
    """Give the handed-out ledger rows (returned, deferred, due scheduled messages) their
    inbox rows, read on the driver by locator; False where that cannot be done (the
    caller then joins the bodies with Spark, ``engine.receive.attempt.with_bodies``)."""
    if any(c["segment"] is None for c in handed if "_message" not in c):
        return False
    missing = {_locator(c): c for c in handed if "_message" not in c}
    if not missing:
        return True
    found = inbox.scan_here(
        {"partition_id": sorted({k[0] for k in missing}),
         "segment": sorted({k[1] for k in missing})},
        [*LOCATOR, *MESSAGE_COLUMNS], lambda r: _locator(r) in missing)
    if found is None or len(found) != len(missing):
        return False
    for row in found:
        missing[_locator(row)]["_message"] = row
    return True


def messages_here(inbox: Inbox, handed: list[dict[str, Any]], copy: bool = True
                  ) -> list[dict[str, Any]] | None:
    """Ledger rows handed out by an operation decided on the driver, as messages with their
    bodies (read on the driver by locator); None where they cannot be read here. Without
    ``copy`` the rows are given their bodies in place."""
    rows = [dict(r) for r in handed] if copy else handed
    return [_message(c) for c in rows] if _with_messages(inbox, rows) else None


def _locator(row: dict[str, Any]) -> tuple[int, int, str, int]:
    return (int(row["partition_id"]), int(row["segment"]), str(row["send_id"]),
            int(row["batch_index"]))


def handed_frame(spark: SparkSession, handed: list[dict[str, Any]]) -> DataFrame:
    """Handed-out rows decided on the driver as the DataFrame ``with_bodies`` joins."""
    names = HANDED_SCHEMA.fieldNames()
    return values_frame(spark, [tuple(c[n] for n in names) for c in handed], HANDED_SCHEMA)


def _message(change: dict[str, Any]) -> dict[str, Any]:
    """A handed-out row as ``with_bodies`` would give it: the message as read, its state as
    decided (``locked_until_utc`` is set from what the caller is told)."""
    message = change["_message"]
    return {c: change[c] if c in ("sequence_number", "partition_id", *STATE_OUT)
            else message.get(c) for c in OUTPUT_COLUMNS}
