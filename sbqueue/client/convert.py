"""Between client messages and the engine's DataFrames, both ways.

Sending: a list of ``ServiceBusMessage`` becomes a local DataFrame (no Spark job) with the
columns a DataFrame send takes, so the client and DataFrames send the very same messages
through one path. Application properties of mixed types become one VARIANT object per
message: each value travels in the typed field of a small struct and is cast to VARIANT in
one SQL expression, so an int stays an int and a datetime a datetime (decision 005).

Receiving: a row of a received DataFrame becomes a ``ServiceBusReceivedMessage`` with
timezone-aware UTC datetimes.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import (
    BinaryType,
    DayTimeIntervalType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    VariantType,
    VariantVal,
)

from sbqueue.client.enums import ServiceBusMessageState
from sbqueue.client.message import (
    ServiceBusMessage,
    ServiceBusReceivedMessage,
)
from sbqueue.core.clock import as_utc
from sbqueue.core.sizes import STRING_PROPERTIES
from sbqueue.engine.columns import values_frame
from sbqueue.store.variant import encode_object, restore, type_note

__all__ = ["to_dataframe", "to_outgoing", "to_received", "typed_properties", "utc"]

_SCHEMA = StructType([
    StructField("body", BinaryType()),
    *[StructField(name, StringType()) for name in STRING_PROPERTIES],
    StructField("time_to_live", DayTimeIntervalType()),
    StructField("scheduled_enqueue_time_utc", TimestampType()),
    StructField("application_properties", VariantType()),
])


def utc(value: datetime | None) -> datetime | None:
    """Aware UTC. A naive datetime given by a caller is taken as UTC (the ``_utc`` names
    say so); PySpark returns naive local times, which ``to_received`` converts."""
    return None if value is None else as_utc(value)


def to_outgoing(messages: Sequence[ServiceBusMessage]) -> list[dict[str, Any]]:
    """The messages as a send takes them (``engine.send.small``; ``to_dataframe`` from
    the same values): each validated and given a message id first (S2.6)."""
    out = []
    for message in messages:
        message.validate()
        if message.message_id is None:
            message.message_id = uuid.uuid4().hex
        props = message.application_properties
        out.append({
            "body": message.body_bytes,
            **{name: getattr(message, name) for name in STRING_PROPERTIES},
            "time_to_live": message.time_to_live,
            "scheduled_enqueue_time_utc": utc(message.scheduled_enqueue_time_utc),
            "application_properties": None if props is None else dict(props),
        })
    return out


def _fields(outgoing: dict[str, Any]) -> dict[str, Any]:
    """An outgoing message as the values of ``_SCHEMA``'s columns: the properties as the
    VARIANT object the driver send stores (``store.variant``: the same bytes either way,
    with the note that brings uuid and timedelta values back)."""
    props = outgoing["application_properties"]
    return {**outgoing, "application_properties": None if props is None
            else VariantVal(*encode_object(props))}


def to_dataframe(spark: SparkSession, messages: Sequence[ServiceBusMessage]) -> DataFrame:
    """The messages as a DataFrame send takes them; gives each a message id first (S2.6).
    Only columns some message sets are sent: a send without keys then skips the routing
    UDF (S4.3)."""
    rows = [_fields(m) for m in to_outgoing(messages)]
    used = [f for f in _SCHEMA.fields
            if f.name == "body" or any(row[f.name] is not None for row in rows)]
    values = [tuple(row[f.name] for f in used) for row in rows]
    if any(f.name == "application_properties" for f in used):  # VARIANT: no SQL literal
        return spark.createDataFrame(values, StructType(used))
    return values_frame(spark, values, StructType(used))  # no Python worker in the send's job


_STATES = {"Active": ServiceBusMessageState.ACTIVE, "Deferred": ServiceBusMessageState.DEFERRED,
           "Scheduled": ServiceBusMessageState.SCHEDULED}
_BROKER = ("sequence_number", "enqueued_sequence_number", "delivery_count", "lock_token",
           "dead_letter_reason", "dead_letter_error_description", "dead_letter_source",
           "partition_id")
_TIMES = ("enqueued_time_utc", "expires_at_utc", "locked_until_utc")


def _local_utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


def typed_properties(value: Any) -> dict[str, Any] | None:
    """A message's ``application_properties`` (the VARIANT of a received or peeked
    DataFrame row, or of the SQL view) as the client returns them: datetimes aware UTC, and
    the uuid and timedelta values a client sent as ``uuid.UUID`` / ``timedelta`` (Spark
    reads those as strings; ``store.variant`` notes their types)."""
    if value is None:
        return None
    decoded = value.toPython()
    if not isinstance(decoded, Mapping):
        return None
    typed = restore(decoded, type_note(bytes(value.metadata)))
    return {k: (_local_utc(v) if isinstance(v, datetime) else v) for k, v in typed.items()}


def to_received(row: Row) -> ServiceBusReceivedMessage:
    """A row of a received (or peeked) DataFrame as the message the SDK would return."""
    data = row.asDict()
    broker: dict[str, Any] = {name: data.get(name) for name in _BROKER}
    broker.update({name: _local_utc(data.get(name)) for name in _TIMES})
    broker["state"] = _STATES.get(data.get("state") or "Active", ServiceBusMessageState.ACTIVE)
    ttl_ms = data.get("time_to_live_ms")
    return ServiceBusReceivedMessage(
        bytes(data.get("body") or b""),
        broker=broker,
        application_properties=typed_properties(data.get("application_properties")),
        scheduled_enqueue_time_utc=_local_utc(data.get("scheduled_enqueue_time_utc")),
        time_to_live=None if ttl_ms is None else timedelta(milliseconds=ttl_ms),
        **{name: data.get(name) for name in STRING_PROPERTIES},
    )
