"""Table layouts of an entity: the inbox (message log) and the ledger (message state).

inbox   partitioned by (partition_id, segment). Sends are blind appends; rows are immutable
        and hold the only copy of each body. Change data feed on (a receive reads only the
        commits after its partition's cursor); row tracking on (the SQL view orders rows by
        ``_metadata.row_commit_version`` without the change feed).
ledger  partitioned by (partition_id, lane). Narrow rows, no bodies: one ``p`` row per
        partition once its cursor has moved (the last inbox row it has passed and its
        counter; none yet: nothing passed, ``engine.receive.attempt.with_unstored``) and one
        ``m`` row per message the cursor has passed that is still in the entity (locked,
        returned, deferred, scheduled, dead-lettered). A row points at its inbox row by
        (segment, send_id, batch_index). Why: docs/decisions/004-cursor-layout.md.
        Also one ``s`` row per session (lane ``session``: its lock and state, decision 007)
        and one ``t`` row per committed transaction (lane ``main``: its commit marker,
        decision 008), and ``c`` rows: completion records, appended by completes and folded
        by receives (``engine.records``, decision 011), and ``w`` rows (lane ``transfer``):
        a forwarding window, inbox rows a forwarding step moved its cursor past in one go
        (``engine.forward.window``, decision 017). Every row is keyed by (partition_id,
        sequence_number, row_type) (a record also by its lock token): s and t rows take
        negative numbers drawn from a 62-bit hash of their session or send id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    VariantType,
)

from sbqueue.engine.columns import values_frame
from sbqueue.store.guarded import EXPECT_COLUMN, OP_COLUMN

__all__ = [
    "COPY_BITS",
    "INBOX_PROPERTIES",
    "INBOX_PROTOCOL",
    "INBOX_SCHEMA",
    "LEDGER_COLUMNS",
    "LEDGER_KEYS",
    "LEDGER_MATCH",
    "LEDGER_PROPERTIES",
    "LEDGER_PROTOCOL",
    "LEDGER_SCHEMA",
    "LEDGER_TYPES",
    "LOCATOR",
    "MESSAGE_FIELDS",
    "RECORD",
    "SEGMENT_SECONDS",
    "STATE_FIELDS",
    "TRANSACTION_SEND_PREFIX",
    "WINDOW",
    "change_frame",
    "copy_of",
    "dead_letter_mark",
    "ledger_match",
    "ledger_row",
    "owned_rows",
    "owned_rows_sql",
    "owns",
]

SEGMENT_SECONDS = 3600  # inbox segment width: purge drops whole, fully passed segments
LOCATOR = ["partition_id", "segment", "send_id", "batch_index"]  # an inbox row's identity
# The send id of a transaction's inbox rows: they are invisible until a ``t`` row (the
# commit marker, lane main) with that send id is in the ledger (S12.2, decision 008).
TRANSACTION_SEND_PREFIX = "tx-"
# A topic's inbox row is one copy of a message: ``targets`` lists the subscriptions (entity
# ids) it goes to. The rule copies of one message (decision 009) take batch indexes
# ``index << COPY_BITS | copy``: copy 0 is the plain copy, copy k the k-th action rule's.
COPY_BITS = 12

# The message as sent (SPEC S2.1) plus what the broker stamps at send.
MESSAGE_FIELDS: list[StructField] = [
    StructField("message_id", StringType()),
    StructField("session_id", StringType()),
    StructField("partition_key", StringType()),
    StructField("correlation_id", StringType()),
    StructField("subject", StringType()),
    StructField("content_type", StringType()),
    StructField("to", StringType()),
    StructField("reply_to", StringType()),
    StructField("reply_to_session_id", StringType()),
    StructField("time_to_live_ms", LongType()),
    StructField("scheduled_enqueue_time_utc", TimestampType()),
    StructField("application_properties", VariantType()),
    StructField("body", BinaryType()),
    StructField("size_in_bytes", IntegerType()),
    StructField("enqueued_time_utc", TimestampType()),
    StructField("expires_at_utc", TimestampType()),
    StructField("enqueued_sequence_number", LongType()),
    StructField("hop_count", IntegerType()),
]

INBOX_SCHEMA = StructType(
    [
        StructField("partition_id", IntegerType(), False),
        StructField("segment", LongType(), False),
        StructField("send_id", StringType(), False),  # one per send call (one commit)
        StructField("batch_index", LongType(), False),  # order within the send
        *MESSAGE_FIELDS,
        StructField("targets", ArrayType(StringType())),  # topic fan-out, set at send
    ]
)

# What a receive needs to decide about a message without its body (S5, S6, S8).
STATE_FIELDS: list[StructField] = [
    StructField("state", StringType()),  # Active | Deferred | Scheduled
    StructField("delivery_count", IntegerType()),
    StructField("lock_token", StringType()),
    StructField("locked_until_utc", TimestampType()),
    StructField("dead_letter_reason", StringType()),
    StructField("dead_letter_error_description", StringType()),
    StructField("dead_letter_source", StringType()),
]

LEDGER_SCHEMA = StructType(
    [
        StructField("partition_id", IntegerType(), False),
        StructField("lane", StringType(), False),  # sbqueue.core.transitions.Lane
        StructField("sequence_number", LongType(), False),  # p rows: core.sequence.cursor_key
        StructField("row_type", StringType(), False),  # m | p
        StructField("row_version", LongType(), False),
        StructField("segment", LongType()),
        StructField("send_id", StringType()),
        StructField("batch_index", LongType()),
        StructField("message_id", StringType()),
        StructField("session_id", StringType()),
        StructField("enqueued_time_utc", TimestampType()),
        StructField("scheduled_enqueue_time_utc", TimestampType()),
        StructField("expires_at_utc", TimestampType()),
        StructField("size_in_bytes", IntegerType()),
        *STATE_FIELDS,
        # p rows: the cursor (inbox commit version and batch index of the last row passed)
        # and the counter that row got.
        StructField("cursor_version", LongType()),
        StructField("cursor_index", LongType()),
        StructField("last_counter", LongType()),
        StructField("session_state", BinaryType()),  # s rows, sessions issue (S10.5)
    ]
)
LEDGER_COLUMNS = [f.name for f in LEDGER_SCHEMA.fields]
RECORD = "c"  # the row type of a completion record (engine.records)
WINDOW = "w"  # the row type of a forwarding window (engine.forward.window)
# A ledger row's identity in a MERGE: m, p, s and t rows by (partition, sequence number,
# type); a completion record also by its lock token (one per holder of a message).
LEDGER_KEYS = ["partition_id", "sequence_number", "row_type"]
LEDGER_MATCH = f"(t.row_type <> '{RECORD}' OR t.lock_token <=> s.lock_token)"


def ledger_match(stored: Mapping[str, Any], change: Mapping[str, Any]) -> bool:
    """``LEDGER_MATCH`` on plain rows (a rewrite on the driver, ``store.guarded.apply_guarded``)."""
    return bool(stored["row_type"] != RECORD or stored["lock_token"] == change["lock_token"])


LEDGER_TYPES: dict[str, DataType] = {f.name: f.dataType for f in LEDGER_SCHEMA.fields}

INBOX_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.enableRowTracking": "true",
    "delta.logRetentionDuration": "interval 30 days",
    # Forwarded batches are appended with Delta's idempotent-write ids (decision 010);
    # without a retention every id would stay in the table's state for ever.
    "delta.setTransactionRetentionDuration": "interval 7 days",
    # Statistics only where reads skip files (a send's rows, a message id, a session) or
    # where the log answers an aggregate (the size quota's bound: max size_in_bytes):
    # statistics on every column measured a third of a bulk send's time (decision 004).
    "delta.dataSkippingStatsColumns": "send_id,batch_index,message_id,session_id,"
                                      "enqueued_time_utc,size_in_bytes",
}
# The protocols Delta derives from these properties and schemas (Spark's ``CREATE TABLE``
# writes them; a driver-made table states them, ``store.created``, decision 026): row
# tracking and the variant column need table features, which carry the legacy features of
# writer versions 2 and 4 (invariants, append-only, change data feed) along.
INBOX_PROTOCOL: Mapping[str, Any] = MappingProxyType({
    "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ("variantType",),
    "writerFeatures": ("domainMetadata", "rowTracking", "invariants", "variantType",
                       "changeDataFeed", "appendOnly")})
LEDGER_PROTOCOL: Mapping[str, Any] = MappingProxyType({"minReaderVersion": 1,
                                                       "minWriterVersion": 2})
LEDGER_PROPERTIES = {
    # A receive's MERGE must conflict with a completion record appended into what it read
    # (decision 011): at Delta's default level, WriteSerializable, blind appends never do.
    # The ledger's only blind appends are those records.
    "delta.isolationLevel": "Serializable",
    # Ledger files are small and narrow: a keyed DELETE or UPDATE that rewrites the one file
    # holding the row ran 4 Spark jobs, with deletion vectors 8 (decision 011).
    "delta.enableDeletionVectors": "false",
    "delta.checkpointInterval": "50",
}


def dead_letter_mark(target: str) -> str:
    """The ``targets`` element that puts a subscription's copy in its dead-letter queue from
    the moment it is sent: a copy without a session id for a session subscription (S10.1).
    The copy also lists the subscription itself, so it is numbered as every other copy."""
    return f"{target}:dlq"


def owned_rows_sql(target: str | None) -> str:
    """The SQL predicate of the inbox rows an entity owns: a queue's (``targets`` NULL) or a
    subscription's (``target``, its entity id, in ``targets``) in its topic's inbox."""
    if target is None:
        return "targets IS NULL"
    if not target.isalnum():
        raise ValueError(f"entity id {target!r} is not alphanumeric")
    return f"array_contains(targets, '{target}')"


def owned_rows(target: str | None) -> Column:
    """``owned_rows_sql`` as a Column."""
    if target is None:
        return F.col("targets").isNull()
    return F.array_contains("targets", target)


def owns(target: str | None, targets: Sequence[str] | None) -> bool:
    """``owned_rows`` on a plain row (a read on the driver)."""
    return targets is None if target is None else target in (targets or ())


def copy_of(target: str | None) -> Column:
    """Which copy of its message a row is (0 on a queue): duplicates are found among the
    same copies (S11.2)."""
    if target is None:
        return F.lit(0).cast("long")
    return F.col("batch_index").bitwiseAND((1 << COPY_BITS) - 1)


def ledger_row(**values: Any) -> dict[str, Any]:
    """A ledger row built on the driver: every ledger column, ``values`` set, the rest
    NULL (a change row adds EXPECT_COLUMN and OP_COLUMN among ``values``)."""
    return {**dict.fromkeys(LEDGER_COLUMNS), **values}


def change_frame(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """Full ledger rows built on the driver, each with EXPECT_COLUMN and OP_COLUMN, as the
    source of a guarded MERGE (``store.guarded.guarded_merge``): an inline table, no Spark
    job to make it or to broadcast it."""
    schema = StructType([*LEDGER_SCHEMA.fields, StructField(EXPECT_COLUMN, LongType()),
                         StructField(OP_COLUMN, StringType())])
    return values_frame(spark, [tuple(r.get(c) for c in schema.fieldNames()) for r in rows],
                        schema)
