"""``df.writeStream.format("sbqueue")``: each micro-batch sent as one commit, exactly once.

Executors turn their rows into messages (``outgoing``) and hand them to the driver in
their commit messages; the driver's commit sends them all in ONE inbox append made by
sbqueue on the driver (``Entity.send_once``) carrying Delta's ``txn`` action with the
query's id and the batch id. A batch that Spark replays after a crash (the append landed,
Spark's own commit did not) finds its id at that version or later and sends nothing:
every input row is in the entity exactly once (decision 024). An inbox that writer refuses
(a table feature enabled later, such as in-commit timestamps or deletion vectors, or a
schema altered) fails the batch with an error naming what it refused: the worker has no
Spark writer to fall back on (decision 031).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType, TimestampNTZType, VariantVal

from sbqueue.core.sizes import STRING_PROPERTIES
from sbqueue.datasource.options import Options, query_id
from sbqueue.engine.namespace import Namespace
from sbqueue.engine.send.frame import check_send_schema
from sbqueue.exceptions import InvalidOperationError, StorageConflictError

__all__ = ["StreamSink", "outgoing"]


@dataclass
class _Messages(WriterCommitMessage):
    """One task's rows, as messages."""

    messages: list[dict[str, Any]]


def outgoing(row: Row, wall_clock_schedule: bool = False) -> dict[str, Any]:
    """A row of a send DataFrame (S2.1 columns) as the driver send takes it: body bytes,
    time to live a ``timedelta``, the schedule aware UTC, properties a dict, and a message
    id (S2.6). PySpark hands a TIMESTAMP as a naive time in the worker's zone, and a
    TIMESTAMP_NTZ (``wall_clock_schedule``) as its naive wall-clock value, read as UTC
    here, as a DataFrame send reads it in sbqueue's UTC session."""
    values = row.asDict()
    body = values["body"]
    if body is None:
        raise InvalidOperationError("a message's body is null; every row needs one (S2.1)")
    ttl = values.get("time_to_live")
    scheduled: datetime | None = values.get("scheduled_enqueue_time_utc")
    message = {name: values.get(name) for name in STRING_PROPERTIES}
    message.update(
        body=body.encode("utf-8") if isinstance(body, str) else bytes(body),
        time_to_live=ttl if ttl is None or isinstance(ttl, timedelta)
        else timedelta(seconds=float(ttl)),
        scheduled_enqueue_time_utc=None if scheduled is None
        else _utc(scheduled, wall_clock_schedule),
        application_properties=_properties(values.get("application_properties")))
    message["message_id"] = message["message_id"] or uuid.uuid4().hex
    return message


def _utc(at: datetime, wall_clock: bool) -> datetime:
    if wall_clock and at.tzinfo is None:
        return at.replace(tzinfo=timezone.utc)
    return at.astimezone(timezone.utc)


def _properties(value: Any) -> dict[str, Any] | None:
    """A map, a struct or a VARIANT object of application properties, as a dict."""
    if value is None:
        return None
    if isinstance(value, VariantVal):
        value = value.toPython()
    if isinstance(value, Row):
        value = value.asDict()
    if not isinstance(value, Mapping):
        raise InvalidOperationError(
            f"application_properties {value!r} is not an object of properties (S2.3)")
    return dict(value)


class StreamSink(DataSourceStreamWriter):
    """The writer of one streaming query into one queue or topic."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        check_send_schema(schema)
        self.options = Options.parse(options)
        self.raw = dict(options)
        self.wall_clock = any(f.name == "scheduled_enqueue_time_utc"
                              and isinstance(f.dataType, TimestampNTZType) for f in schema)

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return _Messages([outgoing(row, self.wall_clock) for row in iterator])

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows = [m for part in messages if isinstance(part, _Messages) for m in part.messages]
        if not rows:
            return
        namespace = Namespace.without_spark(self.options.namespace, self.options.where())
        target = namespace.sendable(self.options.entity)
        try:
            target.send_once(rows, query_id(self.raw), batchId)
        except StorageConflictError as exc:
            if target.inbox.refused is None:
                raise  # a conflict: nothing stored, the batch is tried again
            raise InvalidOperationError(
                f"{self.options.where()}: batch {batchId} was not stored: sbqueue's driver "
                f"writer refuses the inbox ({target.inbox.refused}), and a Python data "
                "source's worker has no Spark writer to fall back on; send with "
                "send_dataframe in foreachBatch instead (decision 024)") from exc

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing was stored: a batch's messages are only sent by its commit."""
