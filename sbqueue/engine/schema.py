"""Table layouts of an entity: the inbox (message log) and the ledger.

inbox   partitioned by (partition_id, segment). Sends are blind appends; rows are
        immutable; change data feed on, so a partition's ingest reads only new commits.
ledger  partitioned by partition_id. One row per message still in the entity (active,
        deferred, scheduled, locked or dead-lettered), one ``p`` row per partition (ingest
        watermark and sequence counter), one ``s`` row per session. Every change is a guarded
        MERGE into one partition. Why: docs/decisions/001-storage-layout.md.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = [
    "INBOX_PROPERTIES",
    "INBOX_SCHEMA",
    "LEDGER_COLUMNS",
    "LEDGER_PROPERTIES",
    "LEDGER_SCHEMA",
    "MESSAGE_FIELDS",
    "SEGMENT_SECONDS",
]

SEGMENT_SECONDS = 3600  # inbox segment width: purge drops whole, fully ingested segments

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
    StructField("application_properties", MapType(StringType(), StringType())),
    StructField("body", BinaryType()),
    StructField("size_in_bytes", IntegerType()),
    StructField("enqueued_time_utc", TimestampType()),
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

LEDGER_SCHEMA = StructType(
    [
        StructField("partition_id", IntegerType(), False),
        StructField("key", StringType(), False),  # m:<seq hex> | p | s:<session id>
        StructField("row_type", StringType(), False),
        StructField("row_version", LongType(), False),
        StructField("sequence_number", LongType()),
        *MESSAGE_FIELDS,
        StructField("sub_queue", StringType()),  # '' | 'dlq' | 'tdlq'
        StructField("state", StringType()),  # Active | Deferred | Scheduled
        StructField("delivery_count", IntegerType()),
        StructField("lock_token", StringType()),
        StructField("locked_until_utc", TimestampType()),
        StructField("expires_at_utc", TimestampType()),
        StructField("dead_letter_reason", StringType()),
        StructField("dead_letter_error_description", StringType()),
        StructField("dead_letter_source", StringType()),
        # p rows: ingest watermark (inbox version) and the last sequence counter given out.
        StructField("inbox_version", LongType()),
        StructField("last_counter", LongType()),
        # s rows: session state (S10.5).
        StructField("session_state", BinaryType()),
    ]
)
LEDGER_COLUMNS = [f.name for f in LEDGER_SCHEMA.fields]

INBOX_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.logRetentionDuration": "interval 30 days",
}
LEDGER_PROPERTIES = {
    "delta.enableDeletionVectors": "true",
    "delta.checkpointInterval": "50",
}
