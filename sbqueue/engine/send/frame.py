"""A DataFrame send: validate, stamp and route every row in one plan, then one blind append.

Column types are checked when the plan is built (a wrong type is an sbqueue error naming
the column); row values are checked inside the write job, where a bad row fails the job
before Delta commits, so a send with one bad message stores nothing (S17).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf  # type: ignore[attr-defined]
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DayTimeIntervalType,
    LongType,
    MapType,
    NumericType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from sbqueue.core.durations import is_never
from sbqueue.core.properties import QueueProperties, TopicProperties
from sbqueue.core.routing import key_expr, partitions_for
from sbqueue.core.sizes import HEADER_LIMIT, MAX_ID_LENGTH, STRING_PROPERTIES, message_limit
from sbqueue.engine.columns import now_column, to_column
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.schema import INBOX_SCHEMA, MESSAGE_FIELDS, SEGMENT_SECONDS
from sbqueue.exceptions import (
    InvalidOperationError,
    MessageSizeExceededError,
    PartitionUnavailableError,
)

__all__ = ["SETTABLE", "SendResult", "check_send_schema", "grouped_by_partition", "prepare_send",
           "refusal",
           "send_dataframe"]

SETTABLE = frozenset({*STRING_PROPERTIES, "body", "time_to_live", "scheduled_enqueue_time_utc",
                      "application_properties"})
# Set only by a forwarding step, which carries them from the source (S3.3, S13.2, S13.3),
# with the size the source measured (the same message, checked when first sent).
CARRIED = frozenset({"enqueued_sequence_number", "hop_count", "size_in_bytes",
                     "time_to_live_ms"})
_MARK = "sbqueue-invalid "


@dataclass(frozen=True)
class SendResult:
    """What a send stored: the message count, their bytes and the commit it made."""

    count: int
    send_id: str
    size_in_bytes: int = 0
    version: int | None = None  # the inbox commit, where the send knows it (a driver send)


def _type_problem(name: str, kind: DataType) -> str | None:
    """Why a column of this type cannot carry ``name`` (S2.1, S2.3), or None."""
    if name == "body":
        ok = isinstance(kind, (StringType, BinaryType))
    elif name == "time_to_live":
        ok = isinstance(kind, (NumericType, DayTimeIntervalType))
    elif name in CARRIED:
        ok = isinstance(kind, NumericType)
    elif name == "scheduled_enqueue_time_utc":
        ok = isinstance(kind, (TimestampType, TimestampNTZType))
    elif name == "application_properties":
        return _properties_problem(kind)
    else:
        ok = isinstance(kind, StringType)
    return None if ok else f"column {name} has type {kind.simpleString()}"


_PROPERTY_TYPES = (StringType, NumericType, TimestampType, TimestampNTZType,
                   DayTimeIntervalType)


def _property_type_ok(kind: DataType) -> bool:
    from pyspark.sql.types import BooleanType, DecimalType, NullType

    return isinstance(kind, (*_PROPERTY_TYPES, BooleanType, NullType)) and not isinstance(
        kind, DecimalType)


def _properties_problem(kind: DataType) -> str | None:
    """application_properties: a map with string keys, a struct of primitive fields, or a
    VARIANT object; values of the types S2.3 allows."""
    if isinstance(kind, VariantType):
        return None  # checked per row inside the job
    if isinstance(kind, MapType):
        if not isinstance(kind.keyType, StringType):
            return "application_properties map keys must be strings"
        if not _property_type_ok(kind.valueType):
            return (f"application_properties values have type "
                    f"{kind.valueType.simpleString()}")
        return None
    if isinstance(kind, StructType):
        for field in kind.fields:
            if not _property_type_ok(field.dataType):
                return (f"application property {field.name!r} has type "
                        f"{field.dataType.simpleString()}")
        return None
    return f"application_properties has type {kind.simpleString()}"


def _check_columns(df: DataFrame, forwarded: bool) -> None:
    check_send_schema(df.schema, forwarded)


def check_send_schema(schema: StructType, forwarded: bool = False) -> None:
    """Refuse a send's columns that are not message columns or have a type that cannot
    carry them (S2.1, S2.3): before any row is read (a DataFrame send, a streaming sink)."""
    names = schema.fieldNames()
    unknown = sorted(set(names) - SETTABLE - (CARRIED if forwarded else frozenset()))
    if unknown:
        raise InvalidOperationError(
            f"unknown message column(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(sorted(SETTABLE))} (S2.1)")
    if "body" not in names:
        raise InvalidOperationError("a send DataFrame needs a 'body' column (S2.1)")
    for field in schema.fields:
        problem = _type_problem(field.name, field.dataType)
        if problem:
            raise InvalidOperationError(
                f"{problem}; allowed: str/bytes body, string ids, numeric seconds or an "
                "interval for time_to_live, a timestamp for scheduled_enqueue_time_utc, and "
                "str/bool/int/float/timestamp/interval property values (S2.1, S2.3)")


def _iso_duration(column: Column) -> Column:
    seconds = F.unix_micros(F.timestamp_seconds(F.lit(0)) + column) / 1_000_000
    return F.concat(F.lit("PT"), seconds.cast("decimal(20,6)").cast("double").cast("string"),
                    F.lit("S"))


def _as_variant(column: Column, kind: DataType) -> Column:
    """Typed properties as a VARIANT object. VARIANT has no interval type, so an interval
    is stored as an ISO-8601 duration string (docs/decisions/005-typed-properties.md)."""
    if isinstance(kind, VariantType):
        return column
    if isinstance(kind, StructType):
        return F.to_variant_object(F.struct(*[
            (_iso_duration(column[f.name]) if isinstance(f.dataType, DayTimeIntervalType)
             else column[f.name]).alias(f.name)
            for f in kind.fields
        ]))
    if isinstance(kind, MapType) and isinstance(kind.valueType, DayTimeIntervalType):
        column = F.transform_values(column, lambda _, v: _iso_duration(v))
    return F.to_variant_object(column)


def _properties_check(props: Column) -> Column:
    """Per row, a VARIANT must be an object of primitive values (S2.3); else a message."""
    schema = F.schema_of_variant(props)
    nested = F.regexp_count(schema, F.lit("OBJECT<")) > 1
    bad = props.isNotNull() & (
        ~schema.startswith("OBJECT<") | nested | schema.contains("ARRAY<")
        | schema.contains("BINARY"))
    return F.when(bad, F.concat(F.lit("application_properties "), schema,
                                F.lit(" holds a value of a type S2.3 does not allow (S2.3)")))


def _first_problem(props: QueueProperties | TopicProperties, cols: dict[str, Column],
                   header: Column, forwarded: bool = False) -> Column:
    """The first rule a row breaks, as a message naming the value and the rule; else null.
    A forwarded row was checked when first sent: only the rules of this entity (its
    sessions, its size limit) are checked again."""
    checks: list[tuple[Column, Column]] = []
    for name in () if forwarded else ("message_id", "session_id", "partition_key",
                                      "reply_to_session_id"):
        checks.append((
            F.length(cols[name]) > MAX_ID_LENGTH,
            F.concat(F.lit(f"{name} is longer than {MAX_ID_LENGTH} characters: "),
                     F.substring(cols[name], 1, 40), F.lit(" (S2.2)")),
        ))
    checks.append((
        F.lit(not forwarded) & cols["partition_key"].isNotNull()
        & cols["session_id"].isNotNull() & (cols["partition_key"] != cols["session_id"]),
        F.concat(F.lit("partition_key "), cols["partition_key"],
                 F.lit(" differs from session_id "), cols["session_id"], F.lit(" (S2.2)")),
    ))
    if getattr(props, "requires_session", False):
        checks.append((
            cols["session_id"].isNull(),
            F.concat(F.lit(f"queue {props.name} requires sessions; message "),
                     cols["message_id"], F.lit(" has no session_id (S10.1)")),
        ))
    limit = message_limit(props.max_message_size_in_kilobytes)
    checks.append((
        cols["size_in_bytes"] > limit,
        F.concat(F.lit("MessageSizeExceeded: message "), cols["message_id"], F.lit(" is "),
                 cols["size_in_bytes"].cast("string"), F.lit(f" bytes; at most {limit} (S2.4)")),
    ))
    if not forwarded:
        checks.append((
            header > HEADER_LIMIT,
            F.concat(F.lit("MessageSizeExceeded: header of message "), cols["message_id"],
                     F.lit(" exceeds 64 KB (S2.4)")),
        ))
        property_problem = _properties_check(cols["application_properties"])
        checks.append((property_problem.isNotNull(), property_problem))
    problem = F.lit(None).cast(StringType())
    for bad, message in reversed(checks):
        problem = F.when(bad, message).otherwise(problem)
    return problem


def _message_columns(df: DataFrame, props: QueueProperties | TopicProperties) -> dict[str, Column]:
    """Every message field of the inbox from ``df``'s columns, typed, with defaults."""
    cols: dict[str, Column] = {}
    for f in MESSAGE_FIELDS:
        cols[f.name] = (F.col(f"`{f.name}`").cast(f.dataType) if f.name in df.columns
                        and f.name != "application_properties" else F.lit(None).cast(f.dataType))
    cols["body"] = F.col("body").cast(BinaryType())
    if "application_properties" in df.columns:
        cols["application_properties"] = _as_variant(
            F.col("application_properties"), df.schema["application_properties"].dataType)
    ttl_ms = F.lit(None).cast(LongType())
    if "time_to_live_ms" in df.columns:  # carried by a forward: exact, no float seconds
        ttl_ms = F.col("time_to_live_ms").cast(LongType())
    elif "time_to_live" in df.columns:
        ttl = F.col("time_to_live")
        ttl_ms = ((F.unix_micros(F.timestamp_seconds(F.lit(0)) + ttl) / 1000).cast(LongType())
                  if isinstance(df.schema["time_to_live"].dataType, DayTimeIntervalType)
                  else (ttl.cast("double") * 1000).cast(LongType()))
    cols["time_to_live_ms"] = ttl_ms
    cols["message_id"] = F.coalesce(cols["message_id"],
                                    F.regexp_replace(F.expr("uuid()"), "-", ""))  # S2.6
    return cols


def _partition(routed_key: Column, batch_index: Column, n: int, round_robin_start: int,
               fenced: frozenset[int]) -> Column:
    """The partition of each row (S4.2-S4.4): its key's, failing the job when that one is
    unavailable; else spread over the available partitions. ``monotonically_increasing_id``
    restarts in each Spark partition, so the spread hashes it rather than using it."""
    available = [p for p in range(n) if p not in fenced]
    if not available:
        raise PartitionUnavailableError(
            f"all {n} partitions are unavailable; nothing can be sent (S14.2)")
    spread = F.pmod(F.xxhash64(batch_index, F.lit(round_robin_start)), F.lit(len(available)))
    if fenced:
        spread = F.element_at(F.array(*[F.lit(p) for p in available]), (spread + 1).cast("int"))
        refused = F.raise_error(F.concat(
            F.lit(f"{_MARK}PartitionUnavailable: a message keyed "), F.col("_key"),
            F.lit(" routes to unavailable partition "), routed_key.cast("string"),
            F.lit(" (S4.4)"))).cast("int")
        routed_key = F.when(routed_key.isin(sorted(fenced)), refused).otherwise(routed_key)
    return F.coalesce(routed_key, spread).cast("int")


def prepare_send(df: DataFrame, props: QueueProperties | TopicProperties,
                 round_robin_start: int = 0, fenced: frozenset[int] = frozenset(),
                 forwarded: bool = False, by_partition: bool = False) -> DataFrame:
    """The inbox rows for ``df``: defaults, validation (raising in the job), expiry, routing
    around the ``fenced`` partitions. ``forwarded``: ``df`` is a forwarding step's and
    carries the CARRIED columns. ``by_partition``: ``grouped_by_partition`` applied."""
    _check_columns(df, forwarded)
    # Two steps: the message fields first (a generated message id is drawn once there),
    # then the checks and stamps over those columns. In one step the generated id and the
    # typed columns were recomputed in every check that names them: 10x the cost of a raw
    # projection (decision 004).
    typed = df.select(*[c.alias(n) for n, c in _message_columns(df, props).items()])
    cols: dict[str, Column] = {n: F.col(f"`{n}`") for n in typed.columns}
    header = F.coalesce(F.octet_length(F.to_json(cols["application_properties"])), F.lit(0))
    for name in STRING_PROPERTIES:
        header = header + F.coalesce(F.octet_length(cols[name]), F.lit(0))
    if not (forwarded and "size_in_bytes" in df.columns):
        cols["size_in_bytes"] = (F.coalesce(F.octet_length(cols["body"]), F.lit(0)) + header
                                 ).cast("int")
    problem = _first_problem(props, cols, header, forwarded)
    cols["body"] = F.when(problem.isNull(), cols["body"]).otherwise(
        F.raise_error(F.concat(F.lit(_MARK), problem)).cast(BinaryType()))
    now = now_column()
    ttl_ms = cols["time_to_live_ms"]
    if not is_never(props.default_message_time_to_live):  # S8.1: capped by the entity
        cap = int(props.default_message_time_to_live.total_seconds() * 1000)
        ttl_ms = F.least(F.coalesce(ttl_ms, F.lit(cap)), F.lit(cap))
    cols["enqueued_time_utc"] = now
    # S8.1, S8.4: the time to live counts from activation (now, or a future schedule).
    active_from = F.greatest(now, F.coalesce(cols["scheduled_enqueue_time_utc"], now))
    cols["expires_at_utc"] = F.when(ttl_ms.isNotNull(), F.timestamp_micros(
        F.unix_micros(active_from) + F.greatest(ttl_ms, F.lit(1000)) * 1000))
    if not forwarded:
        cols["enqueued_sequence_number"] = F.lit(0).cast("long")
        cols["hop_count"] = F.lit(0)
    key = to_column(key_expr(props.requires_duplicate_detection))  # S4.1, over ``typed``
    routed = typed.select(*[c.alias(n) for n, c in cols.items()], key.alias("_key"),
                       F.monotonically_increasing_id().alias("batch_index"))
    n = props.partition_count
    keyed = n > 1 and bool({"session_id", "partition_key"} & set(df.columns)
                           or props.requires_duplicate_detection)
    # The Python UDF costs a worker round trip per batch: only pay it when a row can have
    # a key.
    routed_key = _route_udf(n)(F.col("_key")) if keyed else F.lit(None).cast("int")
    rows = routed.select(
        _partition(routed_key, F.col("batch_index"), n, round_robin_start, fenced
                   ).alias("partition_id"),
        F.floor(F.unix_seconds(now) / SEGMENT_SECONDS).cast("long").alias("segment"),
        F.lit("").alias("send_id"),
        "*",
        F.lit(None).cast("array<string>").alias("targets"),
    ).select(*[f.name for f in INBOX_SCHEMA.fields])
    return grouped_by_partition(rows) if by_partition else rows


def grouped_by_partition(rows: DataFrame) -> DataFrame:
    """``rows`` renumbered so that each Spark task's rows of one partition hold consecutive
    batch indexes, in their order (decision 018): a receive's window of them is then a few
    runs, numbered by one expression rather than a join. The sort is the one the
    partitioned write makes anyway; only the order across partitions within a send
    changes, which a caller reading a send's numbers in send order must not be given."""
    return rows.sortWithinPartitions("partition_id", "batch_index").withColumn(
        "batch_index", F.monotonically_increasing_id())


def send_dataframe(df: DataFrame, props: QueueProperties | TopicProperties, inbox: Inbox,
                   round_robin_start: int = 0, fenced: frozenset[int] = frozenset(),
                   send_id: str | None = None,
                   shape: Callable[[DataFrame], DataFrame] | None = None,
                   forwarded: bool = False, idempotent: bool = False,
                   by_partition: bool = False) -> SendResult:
    """Append ``df`` to the inbox in one commit; a bad row stores nothing. ``send_id``: a
    transaction's (its rows stay invisible until it commits, decision 008); ``shape``: what
    turns the prepared rows into the rows stored (a topic's fan-out); ``forwarded``: a
    forwarding step's batch (it carries the CARRIED columns); ``idempotent``: written at
    most once per ``send_id`` (Delta's idempotent write: a repeat is skipped, decision
    010); ``by_partition``: batch indexes grouped by partition (``grouped_by_partition``)."""
    send_id = send_id or uuid.uuid4().hex
    counted = Observation(f"send-{send_id}")
    try:
        rows = prepare_send(df, props, round_robin_start, fenced, forwarded, by_partition)
        if shape is not None:
            rows = shape(rows)
        rows = rows.withColumn("send_id", F.lit(send_id))
        if idempotent:  # a repeat runs no job, so nothing could be observed: the caller counts
            inbox.append(rows, txn=(send_id, 0))
            return SendResult(count=0, send_id=send_id)
        inbox.append(rows.observe(counted, F.count(F.lit(1)).alias("rows"),
                                  F.sum("size_in_bytes").alias("bytes")),
                     tag=send_id)  # its commit is found by it (``engine.send.numbers``)
    except Exception as exc:
        text = str(exc)
        if _MARK not in text:
            raise
        detail = text.split(_MARK, 1)[1].split(" SQLSTATE")[0].split("\n")[0].strip()
        raise refusal(detail) from None
    observed = counted.get
    return SendResult(count=int(observed.get("rows", 0)), send_id=send_id,
                      size_in_bytes=int(observed.get("bytes") or 0))


def refusal(problem: str) -> Exception:
    """The error of a refused send, from the problem text the checks give (its class by its
    prefix): one mapping for the Spark send and the driver send."""
    if problem.startswith("MessageSizeExceeded: "):
        return MessageSizeExceededError(problem.split(": ", 1)[1])
    if problem.startswith("PartitionUnavailable: "):
        return PartitionUnavailableError(problem.split(": ", 1)[1])
    return InvalidOperationError(problem)


def _route_udf(partitions: int) -> Callable[[Column], Column]:
    """The vectorized form of ``partition_for`` (an Arrow UDF over mmh3)."""
    @pandas_udf("int")  # type: ignore[untyped-decorator]
    def route(keys: pd.Series) -> pd.Series:
        return partitions_for(keys, partitions)

    return route  # type: ignore[no-any-return]
