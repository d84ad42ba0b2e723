"""Operations on one entity as DataFrames: send, receive (lock), settle, peek, count.

Data flow (docs/decisions/001-storage-layout.md):

- send: validate + route in one Spark plan, then one blind append to the inbox. A bad row
  raises inside the write job, so nothing is committed (no partial effect).
- receive on partitions P...: read their ledger rows, read the inbox rows appended since
  each partition's watermark (change data feed), give them sequence numbers in commit
  order, pick the first available messages, and write all of it (new rows, locks, the new
  watermarks) in one guarded MERGE whose predicate names P... as literals, so it conflicts
  only with work on those partitions.
- settle: read the rows, check each lock, one guarded MERGE over their partitions.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import Column, DataFrame, Observation, Window
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf  # type: ignore[attr-defined]
from pyspark.sql.types import BinaryType, LongType, StringType

from sbqueue.core.durations import is_never
from sbqueue.core.properties import QueueProperties
from sbqueue.core.routing import partitions_for
from sbqueue.core.sequence import COUNTER_BITS
from sbqueue.engine.schema import (
    INBOX_SCHEMA,
    LEDGER_COLUMNS,
    MESSAGE_FIELDS,
    SEGMENT_SECONDS,
)
from sbqueue.exceptions import InvalidOperationError, MessageSizeExceededError
from sbqueue.store.delta import (
    EXPECT_COLUMN,
    OP_COLUMN,
    append,
    guarded_merge,
    latest_version,
    read_appended,
    retry_conflicts,
)

if TYPE_CHECKING:
    from sbqueue.engine.namespace import Namespace

__all__ = ["Entity", "SendResult", "SettleResult", "SubQueue"]

MAX_ID_LENGTH = 128
STANDARD_MESSAGE_BYTES = 256 * 1024
SETTLE_KINDS = ("complete", "abandon", "defer", "dead_letter", "renew")


class SubQueue:
    MAIN = ""
    DEAD_LETTER = "dlq"
    TRANSFER_DEAD_LETTER = "tdlq"


@dataclass(frozen=True)
class SendResult:
    """What a send stored: the message count and the commit it made."""

    count: int
    send_id: str


@dataclass
class SettleResult:
    """Rows settled, and the sequence numbers whose lock was no longer valid."""

    settled: int = 0
    lock_lost: list[int] = field(default_factory=list)


_MESSAGE_COLUMNS = [f.name for f in MESSAGE_FIELDS]
_STAMPED = ("enqueued_time_utc", "enqueued_sequence_number", "hop_count")
_SETTABLE = {
    "body", "message_id", "session_id", "partition_key", "correlation_id", "subject",
    "content_type", "to", "reply_to", "reply_to_session_id", "time_to_live",
    "time_to_live_ms", "scheduled_enqueue_time_utc", "application_properties",
}


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _key_of(seq: Column) -> Column:
    return F.concat(F.lit("m:"), F.lpad(F.hex(seq), 16, "0"))


class Entity:
    """One queue (or sub-queue) of a namespace, operated on with DataFrames."""

    def __init__(self, namespace: Namespace, props: QueueProperties, sub_queue: str = "") -> None:
        self.namespace = namespace
        self.props = props
        self.sub_queue = sub_queue
        self.spark = namespace.spark
        self.inbox_path = namespace.catalog.data_path(props.entity_id, "inbox")
        self.ledger_path = namespace.catalog.data_path(props.entity_id, "ledger")
        self.partitions = props.partition_count

    @property
    def name(self) -> str:
        return self.props.name

    def _ledger(self, partition: int | None = None) -> DataFrame:
        df = self.spark.read.format("delta").load(self.ledger_path)
        return df if partition is None else df.where(F.col("partition_id") == partition)

    # -- send ------------------------------------------------------------------------------
    def prepare_send(self, df: DataFrame, round_robin_start: int = 0) -> DataFrame:
        """The inbox rows for ``df``: defaults, validation (raising in the job), routing."""
        unknown = sorted(set(df.columns) - _SETTABLE)
        if unknown:
            raise InvalidOperationError(
                f"unknown message column(s) {', '.join(unknown)}; allowed: "
                f"{', '.join(sorted(_SETTABLE))} (S2.1)"
            )
        if "body" not in df.columns:
            raise InvalidOperationError("a send DataFrame needs a 'body' column (S2.1)")
        cols: dict[str, Column] = {}
        for f in MESSAGE_FIELDS:
            cols[f.name] = (
                F.col(f"`{f.name}`").cast(f.dataType) if f.name in df.columns
                else F.lit(None).cast(f.dataType)
            )
        cols["body"] = F.col("body").cast(BinaryType())
        if "time_to_live" in df.columns:
            ttl_type = df.schema["time_to_live"].dataType.simpleString()
            ttl = F.col("time_to_live")
            cols["time_to_live_ms"] = (
                (F.unix_micros(F.timestamp_seconds(F.lit(0)) + ttl) / 1000).cast(LongType())
                if ttl_type.startswith("interval") else (ttl.cast("double") * 1000).cast(LongType())
            )
        cols["message_id"] = F.coalesce(
            cols["message_id"], F.regexp_replace(F.expr("uuid()"), "-", "")
        )
        header = F.coalesce(
            F.aggregate(
                F.map_entries(cols["application_properties"]),
                F.lit(0),
                # values are stored with a 2-byte type tag ("i:"), which is not counted
                lambda acc, e: acc + F.octet_length(e["key"]) + F.octet_length(e["value"]) - 2,
            ),
            F.lit(0),
        )
        for name in ("message_id", "session_id", "partition_key", "correlation_id", "subject",
                     "content_type", "to", "reply_to", "reply_to_session_id"):
            header = header + F.coalesce(F.octet_length(cols[name]), F.lit(0))
        cols["size_in_bytes"] = (
            F.coalesce(F.octet_length(cols["body"]), F.lit(0)) + header).cast("int")
        problem = self._first_problem(cols, header)
        cols["body"] = F.when(problem.isNull(), cols["body"]).otherwise(
            F.raise_error(F.concat(F.lit("sbqueue-invalid "), problem)).cast(BinaryType())
        )
        key = F.coalesce(
            cols["session_id"], cols["partition_key"],
            cols["message_id"] if self.props.requires_duplicate_detection
            else F.lit(None).cast(StringType()),
        )
        index = F.monotonically_increasing_id()
        routed = df.select(*[c.alias(n) for n, c in cols.items()], key.alias("_key"),
                           index.alias("batch_index"))
        n = self.partitions
        keyed = n > 1 and bool(
            {"session_id", "partition_key"} & set(df.columns)
            or self.props.requires_duplicate_detection
        )
        # The Python UDF costs a worker round trip per batch: only pay it when a row can
        # have a key.
        routed_key = _route_udf(n)(F.col("_key")) if keyed else F.lit(None).cast("int")
        now = F.current_timestamp()
        return routed.select(
            # Unkeyed rows (S4.3): monotonically_increasing_id restarts in each Spark
            # partition, so spread by a hash of it rather than by the id itself.
            F.coalesce(routed_key, F.pmod(
                F.xxhash64(F.col("batch_index"), F.lit(round_robin_start)), F.lit(n)
            )).cast("int").alias("partition_id"),
            F.floor(F.unix_seconds(now) / SEGMENT_SECONDS).cast("long").alias("segment"),
            F.lit("").alias("send_id"),
            F.col("batch_index").cast("long"),
            *[F.col(c) for c in _MESSAGE_COLUMNS if c not in _STAMPED],
            now.alias("enqueued_time_utc"),
            F.coalesce(F.col("enqueued_sequence_number"), F.lit(0)).cast("long").alias(
                "enqueued_sequence_number"),
            F.coalesce(F.col("hop_count"), F.lit(0)).cast("int").alias("hop_count"),
            F.lit(None).cast("array<string>").alias("targets"),
        ).select(*[f.name for f in INBOX_SCHEMA.fields])

    def _first_problem(self, cols: dict[str, Column], header: Column) -> Column:
        """The first rule a row breaks, as a message naming the value and rule; else null.

        Evaluated inside the write job: a bad row fails the job before Delta commits, so a
        send with one bad message stores nothing (S17: no partial effect)."""
        checks: list[tuple[Column, Column]] = []
        for name in ("message_id", "session_id", "partition_key", "reply_to_session_id"):
            checks.append((
                F.length(cols[name]) > MAX_ID_LENGTH,
                F.concat(F.lit(f"{name} is longer than {MAX_ID_LENGTH} characters: "),
                         F.substring(cols[name], 1, 40), F.lit(" (S2.2)")),
            ))
        checks.append((
            cols["partition_key"].isNotNull() & cols["session_id"].isNotNull()
            & (cols["partition_key"] != cols["session_id"]),
            F.concat(F.lit("partition_key "), cols["partition_key"],
                     F.lit(" differs from session_id "), cols["session_id"], F.lit(" (S2.2)")),
        ))
        if self.props.requires_session:
            checks.append((
                cols["session_id"].isNull(),
                F.concat(F.lit(f"queue {self.name} requires sessions; message "),
                         cols["message_id"], F.lit(" has no session_id (S10.1)")),
            ))
        limit = self.max_message_bytes()
        checks.append((
            cols["size_in_bytes"] > limit,
            F.concat(F.lit("MessageSizeExceeded: message "), cols["message_id"], F.lit(" is "),
                     cols["size_in_bytes"].cast("string"),
                     F.lit(f" bytes; at most {limit} (S2.4)")),
        ))
        checks.append((
            header > 64 * 1024,
            F.concat(F.lit("MessageSizeExceeded: header of message "), cols["message_id"],
                     F.lit(" exceeds 64 KB (S2.4)")),
        ))
        problem = F.lit(None).cast(StringType())
        for bad, message in reversed(checks):
            problem = F.when(bad, message).otherwise(problem)
        return problem

    def max_message_bytes(self) -> int:
        kb = self.props.max_message_size_in_kilobytes
        return kb * 1024 if kb else STANDARD_MESSAGE_BYTES

    def send_dataframe(self, df: DataFrame, round_robin_start: int = 0) -> SendResult:
        """Append ``df`` (``body`` plus any message column of S2.1) in one commit."""
        send_id = uuid.uuid4().hex
        counted = Observation(f"send-{send_id}")
        rows = self.prepare_send(df, round_robin_start).withColumn("send_id", F.lit(send_id))
        try:
            append(rows.observe(counted, F.count(F.lit(1)).alias("rows")), self.inbox_path)
        except Exception as exc:
            text = str(exc)
            if "sbqueue-invalid" in text:
                detail = text.split("sbqueue-invalid ", 1)[1].split(" SQLSTATE")[0].strip()
                if detail.startswith("MessageSizeExceeded: "):
                    raise MessageSizeExceededError(detail.split(": ", 1)[1]) from None
                raise InvalidOperationError(detail) from None
            raise
        return SendResult(count=int(counted.get.get("rows", 0)), send_id=send_id)

    # -- receive ---------------------------------------------------------------------------
    def _ingest_and_pick(
        self, partitions: list[int], share: int, mode: str, now: datetime,
        total: int | None = None,
    ) -> tuple[DataFrame, DataFrame]:
        """(changes for one guarded MERGE, rows handed out) for a set of partitions.

        New inbox rows get ``(partition << 48) + counter`` in commit order; up to ``share``
        available messages per partition are picked in sequence order, and at most
        ``total`` in all.
        """
        props = self.props
        spark = self.spark
        ledger = self._ledger().where(F.col("partition_id").isin(partitions))
        metas = {r["partition_id"]: r for r in ledger.where(F.col("row_type") == "p").select(
            "partition_id", "inbox_version", "last_counter", "row_version").collect()}
        marks = {p: int(metas[p]["inbox_version"]) if p in metas else 0 for p in partitions}
        counters = {p: int(metas[p]["last_counter"]) if p in metas else 0 for p in partitions}
        latest = latest_version(spark, self.inbox_path)
        ts_now = F.lit(now).cast("timestamp")
        rows = ledger.where(F.col("row_type") == "m").withColumn(
            EXPECT_COLUMN, F.col("row_version")).select(*LEDGER_COLUMNS, EXPECT_COLUMN)
        behind = [p for p in partitions if latest > marks[p]]
        new_counts: dict[int, int] = {}
        if behind:
            since = F.lit(False)
            for p in behind:
                since = since | (
                    (F.col("partition_id") == p) & (F.col("_commit_version") > marks[p]))
            appended = read_appended(
                spark, self.inbox_path, min(marks[p] for p in behind), latest,
                F.col("partition_id").isin(behind) & F.col("targets").isNull(),
            ).where(since)
            base = F.create_map(*[x for p in behind for x in (F.lit(p), F.lit(counters[p]))])
            order = Window.partitionBy("partition_id").orderBy("_commit_version", "batch_index")
            seq = (F.col("partition_id").cast("long") * F.lit(1 << COUNTER_BITS)
                   + base[F.col("partition_id")] + F.row_number().over(order))
            ttl_ms = F.col("time_to_live_ms")
            if not is_never(props.default_message_time_to_live):
                cap = int(props.default_message_time_to_live.total_seconds() * 1000)
                ttl_ms = F.least(F.coalesce(ttl_ms, F.lit(cap)), F.lit(cap))
            fresh = appended.select(
                *[F.col(c) for c in _MESSAGE_COLUMNS], "partition_id",
                seq.alias("sequence_number"),
            ).select(
                "*",
                _key_of(F.col("sequence_number")).alias("key"),
                F.lit("m").alias("row_type"),
                F.lit(1).cast("long").alias("row_version"),
                F.lit("").alias("sub_queue"),
                F.when(F.col("scheduled_enqueue_time_utc") > F.col("enqueued_time_utc"),
                       F.lit("Scheduled")).otherwise(F.lit("Active")).alias("state"),
                F.lit(0).alias("delivery_count"),
                F.lit(None).cast("string").alias("lock_token"),
                F.lit(None).cast("timestamp").alias("locked_until_utc"),
                F.when(ttl_ms.isNotNull(), F.timestamp_millis(
                    F.unix_millis(F.col("enqueued_time_utc")) + F.greatest(ttl_ms, F.lit(1000))
                )).alias("expires_at_utc"),
                *[F.lit(None).cast(t).alias(c) for c, t in (
                    ("dead_letter_reason", "string"), ("dead_letter_error_description", "string"),
                    ("dead_letter_source", "string"), ("inbox_version", "long"),
                    ("last_counter", "long"), ("session_state", "binary"),
                    (EXPECT_COLUMN, "long"))],
            ).select(*LEDGER_COLUMNS, EXPECT_COLUMN).localCheckpoint()
            new_counts = {r["partition_id"]: r["count"]
                          for r in fresh.groupBy("partition_id").count().collect()}
            rows = rows.unionByName(fresh)

        unlocked = F.col("locked_until_utc").isNull() | (F.col("locked_until_utc") <= ts_now)
        due = (F.col("state") == "Active") | (
            (F.col("state") == "Scheduled") & (F.col("scheduled_enqueue_time_utc") <= ts_now))
        expired = F.coalesce(
            (F.col("expires_at_utc") <= ts_now) & (F.col("sub_queue") == ""), F.lit(False))
        exhausted = (F.col("delivery_count") >= F.lit(props.max_delivery_count)) & (
            F.col("sub_queue") == "")
        available = (F.col("sub_queue") == self.sub_queue) & due & unlocked
        # Expired (S8.2) and exhausted (S6.7) messages are retired, never handed out again.
        retire = available & (expired | exhausted)
        pick = available & ~(expired | exhausted)
        # Rank among the deliverable rows only: locked or deferred rows ahead of them in
        # sequence order must not use up the share.
        rank = F.row_number().over(
            Window.partitionBy("partition_id", "_deliverable").orderBy("sequence_number"))
        marked = rows.withColumn("_deliverable", pick).withColumn(
            "_pick", F.when(F.col("_deliverable"), rank).otherwise(F.lit(None))
        ).drop("_deliverable") if share else rows.withColumn("_pick", F.lit(None).cast("int"))
        if share and total is not None and total < share * len(partitions):
            # Fewer wanted than one round over the partitions: take the first picks of each
            # partition, starting at a random partition so none is always served last.
            start = random.randrange(len(partitions))
            rotated = F.pmod(F.col("partition_id") - F.lit(partitions[start]),
                             F.lit(max(partitions) + 1))
            overall = F.row_number().over(
                Window.orderBy(F.col("_pick").asc_nulls_last(), rotated))
            marked = marked.withColumn(
                "_pick", F.when(overall <= total, F.col("_pick")).otherwise(F.lit(None)))
        picked = F.coalesce(F.col("_pick") <= share, F.lit(False))
        lock_until = F.lit(now + props.lock_duration).cast("timestamp")
        fresh_row = F.col(EXPECT_COLUMN).isNull()
        delivered = {"delivery_count": F.col("delivery_count") + 1, "state": F.lit("Active")}
        if mode == "receive_and_delete":
            op = F.when(picked, F.lit("delete"))
        else:
            op = F.when(picked, F.lit("upsert"))
            delivered.update({"lock_token": F.expr("uuid()"), "locked_until_utc": lock_until,
                              "row_version": F.col("row_version") + 1})
        dead_letter = F.lit(props.dead_lettering_on_message_expiration)
        retired = {
            "sub_queue": F.lit("dlq"), "lock_token": F.lit(None).cast("string"),
            "locked_until_utc": F.lit(None).cast("timestamp"),
            "row_version": F.col("row_version") + 1,
            "dead_letter_reason": F.when(exhausted, F.lit("MaxDeliveryCountExceeded"))
            .otherwise(F.lit("TTLExpiredException")),
        }
        op = op.when(retire & (exhausted | dead_letter), F.lit("upsert")).when(
            retire, F.lit("delete")).when(fresh_row, F.lit("upsert"))
        changes = marked.withColumn(OP_COLUMN, op).where(F.col(OP_COLUMN).isNotNull())
        for column in set(delivered) | set(retired):
            value = F.col(column)
            if column in retired:
                value = F.when(retire & (exhausted | dead_letter), retired[column]).otherwise(value)
            if column in delivered:
                value = F.when(picked, delivered[column]).otherwise(value)
            changes = changes.withColumn(column, value)
        if behind:
            meta_rows = spark.createDataFrame(
                [(p, "p", "p", int(metas[p]["row_version"]) + 1 if p in metas else 1, latest,
                  counters[p] + new_counts.get(p, 0),
                  int(metas[p]["row_version"]) if p in metas else None, "upsert", None)
                 for p in behind],
                "partition_id int, key string, row_type string, row_version long, "
                "inbox_version long, last_counter long, _expect long, _op string, _pick int",
            )
            changes = changes.unionByName(meta_rows, allowMissingColumns=True)
        changes = changes.select(*LEDGER_COLUMNS, EXPECT_COLUMN, OP_COLUMN, "_pick")
        changes = changes.localCheckpoint()
        handed = changes.where(F.coalesce(F.col("_pick") <= share, F.lit(False)))
        # A fresh row taken by receive-and-delete, or expired without dead-lettering, is
        # simply never inserted.
        stored = changes.where(~((F.col(OP_COLUMN) == "delete") & F.col(EXPECT_COLUMN).isNull()))
        return stored.drop("_pick"), handed.drop(OP_COLUMN, EXPECT_COLUMN, "_pick")

    def receive_partitions(self, partitions: list[int], share: int, mode: str = "peek_lock",
                           timeout_seconds: float = 60.0, total: int | None = None
                           ) -> DataFrame:
        """Ingest the given partitions and lock up to ``share`` messages of each (at most
        ``total`` in all); one commit."""

        def attempt() -> DataFrame:
            changes, handed = self._ingest_and_pick(partitions, share, mode, _utcnow(), total)
            if changes.isEmpty():
                return handed
            guarded_merge(self.spark, self.ledger_path, "partition_id", partitions, "key",
                          changes, LEDGER_COLUMNS)
            return handed

        return retry_conflicts(attempt, what=f"receive from {self.name} {partitions}",
                               timeout_seconds=timeout_seconds)

    def receive_dataframe(self, max_messages: int = 100_000, mode: str = "peek_lock") -> DataFrame:
        """Lock (or take) up to ``max_messages`` across all partitions in one commit.

        Each partition contributes at most ``max(1, max_messages // partitions)``, and never
        more than ``max_messages`` in all; every returned row is locked and every locked
        row is returned.
        """
        if mode not in ("peek_lock", "receive_and_delete"):
            raise InvalidOperationError(
                f"mode {mode!r} is not 'peek_lock' or 'receive_and_delete' (S5.1)"
            )
        share = max(1, max_messages // self.partitions)
        handed = self.receive_partitions(list(range(self.partitions)), share, mode,
                                         total=max_messages)
        return handed.select(*[c for c in LEDGER_COLUMNS if c not in (
            "key", "row_type", "row_version", "inbox_version", "last_counter", "session_state",
            "sub_queue")])

    def ingest(self) -> None:
        """Give sequence numbers to everything sent so far (no message is locked)."""
        self.receive_partitions(list(range(self.partitions)), 0)

    # -- settle ----------------------------------------------------------------------------
    def settle(self, locks: list[tuple[int, str]], kind: str, reason: str | None = None,
               description: str | None = None) -> SettleResult:
        """Settle (sequence number, lock token) pairs in one commit over their partitions.

        Pairs whose lock expired or whose token is not the current one are reported in
        ``lock_lost`` and left unchanged (S6.6).
        """
        if kind not in SETTLE_KINDS:
            raise InvalidOperationError(f"unknown settlement {kind!r}")
        props = self.props

        def attempt() -> SettleResult:
            now = _utcnow()
            wanted = self.spark.createDataFrame(locks, "sequence_number long, _token string")
            rows = self._ledger().where(
                F.col("partition_id").isin(partitions) & (F.col("row_type") == "m")).join(
                F.broadcast(wanted), "sequence_number"
            )
            valid = (F.col("lock_token") == F.col("_token")) & (
                F.col("locked_until_utc") > F.lit(now).cast("timestamp"))
            found = rows.withColumn("_valid", valid).withColumn(EXPECT_COLUMN, F.col("row_version"))
            found = found.localCheckpoint()
            checked = found.select("sequence_number", "_valid").collect()
            known = {r["sequence_number"] for r in checked}
            lost = [r["sequence_number"] for r in checked if not r["_valid"]]
            lost += [s for s, _ in locks if s not in known]
            ok = found.where(F.col("_valid")).drop("_valid", "_token")
            cleared = {"lock_token": F.lit(None).cast("string"),
                       "locked_until_utc": F.lit(None).cast("timestamp")}
            version = {"row_version": F.col("row_version") + 1}
            if kind == "complete":
                changes = ok.withColumn(OP_COLUMN, F.lit("delete"))
            elif kind == "renew":
                changes = ok.withColumns({
                    "locked_until_utc": F.lit(now + props.lock_duration).cast("timestamp"),
                    **version, OP_COLUMN: F.lit("upsert")})
            elif kind == "defer":
                changes = ok.withColumns({"state": F.lit("Deferred"), **cleared, **version,
                                          OP_COLUMN: F.lit("upsert")})
            elif kind == "dead_letter":
                changes = ok.withColumns({
                    "sub_queue": F.lit("dlq"), **cleared, **version,
                    "dead_letter_reason": F.lit(reason).cast("string"),
                    "dead_letter_error_description": F.lit(description).cast("string"),
                    OP_COLUMN: F.lit("upsert")})
            else:  # abandon: free at once; past max deliveries it goes to the DLQ (S6.7)
                exhausted = F.col("delivery_count") >= props.max_delivery_count
                changes = ok.withColumns({
                    **cleared, **version, OP_COLUMN: F.lit("upsert"),
                    "sub_queue": F.when(exhausted & (F.col("sub_queue") == ""), F.lit("dlq"))
                    .otherwise(F.col("sub_queue")),
                    "dead_letter_reason": F.when(
                        exhausted & (F.col("sub_queue") == ""), F.lit("MaxDeliveryCountExceeded")
                    ).otherwise(F.col("dead_letter_reason"))})
            changes = changes.select(*LEDGER_COLUMNS, EXPECT_COLUMN, OP_COLUMN)
            settled = len(known) - len([s for s in lost if s in known])
            if settled:
                guarded_merge(self.spark, self.ledger_path, "partition_id", partitions, "key",
                              changes, LEDGER_COLUMNS)
            return SettleResult(settled=settled, lock_lost=sorted(lost))

        if not locks:
            return SettleResult()
        partitions = sorted({seq >> COUNTER_BITS for seq, _ in locks})
        return retry_conflicts(attempt, what=f"{kind} on {self.name} partitions {partitions}")

    def settle_dataframe(self, batch: DataFrame, kind: str, reason: str | None = None,
                         description: str | None = None) -> SettleResult:
        """Settle the rows of ``batch`` whose locks are valid; report the others."""
        pairs = batch.select("sequence_number", "lock_token").collect()
        return self.settle([(int(r[0]), r[1]) for r in pairs], kind, reason, description)

    def complete_dataframe(self, batch: DataFrame) -> SettleResult:
        return self.settle_dataframe(batch, "complete")

    def abandon_dataframe(self, batch: DataFrame) -> SettleResult:
        return self.settle_dataframe(batch, "abandon")

    def defer_dataframe(self, batch: DataFrame) -> SettleResult:
        return self.settle_dataframe(batch, "defer")

    def dead_letter_dataframe(self, batch: DataFrame, reason: str | None = None,
                              error_description: str | None = None) -> SettleResult:
        for what, text in (("reason", reason), ("error_description", error_description)):
            if text is not None and len(text) > 4096:
                raise InvalidOperationError(
                    f"dead-letter {what} is {len(text)} characters; at most 4096 (S6.4)"
                )
        return self.settle_dataframe(batch, "dead_letter", reason, error_description)

    # -- read-only views -------------------------------------------------------------------
    def messages(self) -> DataFrame:
        """Every message row of the ledger (all sub-queues), as Spark SQL shows them."""
        return self._ledger().where(F.col("row_type") == "m").drop(
            "key", "row_type", "row_version", "inbox_version", "last_counter", "session_state")

    def peek_dataframe(self, max_messages: int = 1000, from_sequence: int | None = None
                       ) -> DataFrame:
        """Messages in enqueued-time then sequence order; no lock, no change (S9)."""
        self.ingest()
        view = self.messages().where(F.col("sub_queue") == self.sub_queue)
        if from_sequence is not None:
            view = view.where(F.col("sequence_number") >= from_sequence)
        return view.orderBy("enqueued_time_utc", "sequence_number").limit(max_messages)

    def counts(self) -> dict[str, int]:
        """Message counts by kind, summed over partitions (S16.2); not-yet-ingested sends
        count as active."""
        rows = self.messages().groupBy("sub_queue", "state").count().collect()
        counts = {"active": 0, "scheduled": 0, "dead_letter": 0, "transfer_dead_letter": 0,
                  "transfer": 0}
        for row in rows:
            if row["sub_queue"] == "dlq":
                counts["dead_letter"] += row["count"]
            elif row["sub_queue"] == "tdlq":
                counts["transfer_dead_letter"] += row["count"]
            elif row["state"] == "Scheduled":
                counts["scheduled"] += row["count"]
            else:
                counts["active"] += row["count"]
        counts["active"] += self.pending_count()
        counts["total"] = sum(counts.values())
        return counts

    def size_in_bytes(self) -> int:
        """Bytes of the messages still in the entity (S16.2)."""
        total = self.messages().agg(F.sum("size_in_bytes")).first()
        return int(total[0] or 0) if total else 0

    def partition_counts(self) -> dict[int, int]:
        """Messages per partition (all states and sub-queues)."""
        rows = self.messages().groupBy("partition_id").count().collect()
        return {p: 0 for p in range(self.partitions)} | {r[0]: r[1] for r in rows}

    def pending_count(self) -> int:
        """Messages appended to the inbox but not yet given a sequence number."""
        metas = self._ledger().where(F.col("row_type") == "p").select(
            "partition_id", "inbox_version").collect()
        marks = {r["partition_id"]: r["inbox_version"] for r in metas}
        latest = latest_version(self.spark, self.inbox_path)
        low = min([marks.get(p, 0) for p in range(self.partitions)] or [0])
        if latest <= low:
            return 0
        rows = read_appended(self.spark, self.inbox_path, low, latest, F.lit(True)).select(
            "partition_id", "_commit_version")
        pending = F.lit(False)
        for p in range(self.partitions):
            pending = pending | ((F.col("partition_id") == p)
                                 & (F.col("_commit_version") > marks.get(p, 0)))
        return rows.where(pending).count()


def _route_udf(partitions: int) -> Callable[[Column], Column]:
    """The vectorized form of ``partition_for`` (an Arrow UDF over mmh3)."""
    @pandas_udf("int")  # type: ignore[untyped-decorator]
    def route(keys: pd.Series) -> pd.Series:
        return partitions_for(keys, partitions)

    return route  # type: ignore[no-any-return]
