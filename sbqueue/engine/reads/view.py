"""What an entity holds, read without writing: the Spark SQL view, peek, counts (S9, S16.2).

A message is either still in the inbox after its partition's cursor (never handed out,
never passed) or has a ledger row. Rows after the cursor get, here, the sequence number the
next receive will give them: the cursor's counter plus their rank in commit order
(``_metadata.row_commit_version``, then batch index), so a message is visible with its
final number as soon as its send returns, and nothing is committed to show it (S3.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.duplicates import DUPLICATE_GROUP, PREVIOUS_TIME, is_duplicate
from sbqueue.core.sequence import sequence_sql
from sbqueue.core.subqueues import SubQueue, view_name_sql
from sbqueue.core.transitions import RECORD_AT, SESSIONLESS_REASON, Lane, completed_by_record
from sbqueue.engine.columns import to_sql
from sbqueue.engine.inbox import COMMIT_VERSION, Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.reads.tally import tally, tally_by_partition
from sbqueue.engine.schema import (
    COPY_BITS,
    MESSAGE_FIELDS,
    RECORD,
    TRANSACTION_SEND_PREFIX,
    WINDOW,
    dead_letter_mark,
    owned_rows_sql,
)

__all__ = [
    "MESSAGE_VIEW_COLUMNS",
    "count_messages",
    "count_partitions",
    "inbox_bound",
    "last_commit",
    "may_hold_windows",
    "messages",
    "messages_sql",
]

_FIELDS = [f.name for f in MESSAGE_FIELDS]
MESSAGE_VIEW_COLUMNS = ["sequence_number", "partition_id", *_FIELDS, "state", "sub_queue",
                        "delivery_count", "lock_token", "locked_until_utc",
                        "dead_letter_reason", "dead_letter_error_description",
                        "dead_letter_source"]


def _q(name: str) -> str:
    return f"`{name}`"


_TX = f"send_id LIKE '{TRANSACTION_SEND_PREFIX}%'"


def _accepted(dedupe: timedelta | None, target: str | None) -> str:
    """The sent rows that are not duplicates (S11.2, ``core.duplicates``). A transaction's
    rows are checked when it commits (decision 008), not here."""
    if dedupe is None:
        return "SELECT * FROM sent"
    group = ", ".join(DUPLICATE_GROUP)
    if target is not None:  # a message's plain copy and each rule copy apart
        group += f", batch_index & {(1 << COPY_BITS) - 1}"
    return f"""
  SELECT * FROM (
    SELECT *, lag(enqueued_time_utc) OVER (PARTITION BY {group} ORDER BY _v, batch_index)
           AS {PREVIOUS_TIME}
    FROM sent WHERE NOT {_TX})
  WHERE NOT {to_sql(is_duplicate(dedupe))}
  UNION ALL
  SELECT *, CAST(NULL AS TIMESTAMP) AS {PREVIOUS_TIME} FROM sent WHERE {_TX}"""


def messages_sql(inbox: Inbox, ledger: Ledger, internal: bool = False,
                 dedupe: timedelta | None = None, target: str | None = None,
                 now: datetime | None = None, windows: bool = True) -> str:
    """The SELECT of an entity's messages: every sub-queue, with ``sub_queue`` Main,
    DeadLetter or TransferDeadLetter, ``state`` Active, Deferred or Scheduled. ``internal``
    adds the send id and batch index (the client finds a send's sequence numbers by them).
    ``dedupe``: the duplicate detection window of an entity that detects duplicates; its
    duplicates are not messages and get no sequence number (S11.2, S3.1). ``target``: a
    subscription's entity id (its copies in its topic's inbox). ``now``: the time a
    schedule is due by (``core.clock``); a view leaves it out and reads the time of each
    query. ``windows``: include the messages of forwarding windows (decision 017); a
    caller that knows the ledger holds none leaves them out (three Spark jobs fewer).
    """
    due = "current_timestamp()" if now is None else f"TIMESTAMP'{now.isoformat()}'"
    extra = ", {p}send_id AS _send_id, {p}batch_index AS _batch_index" if internal else ""
    # S8.5: a scheduled topic message waits at the topic; its subscriptions never show it.
    waiting = "" if target is None or internal else " WHERE state <> 'Scheduled'"
    fields = ", ".join(_q(f) for f in _FIELDS) + extra.format(p="")
    # S10.1: a copy marked at fan-out is in the dead-letter queue before any cursor passes.
    dead = "FALSE" if target is None else f"array_contains(targets, '{dead_letter_mark(target)}')"
    inbox_fields = ", ".join(f"i.{_q(f)}" for f in _FIELDS) + extra.format(p="i.")
    window_ctes, window_branch = _window_parts(ledger, fields) if windows else ("", "")
    return f"""SELECT * FROM (
WITH sent AS (
  SELECT *, {COMMIT_VERSION} AS _v FROM {inbox.sql_name} WHERE {owned_rows_sql(target)}
),
inbox AS ({_accepted(dedupe, target)}),
cursors AS (
  SELECT partition_id, cursor_version, cursor_index, last_counter
  FROM {ledger.sql_name} WHERE row_type = 'p'
),
committed AS (SELECT send_id FROM {ledger.sql_name} WHERE row_type = 't'),
records AS (  -- completion records (decision 011): a valid one completed its message
  SELECT partition_id, lane, sequence_number, lock_token, enqueued_time_utc AS {RECORD_AT}
  FROM {ledger.sql_name} WHERE row_type = '{RECORD}'
),
numbered AS (
  SELECT i.*, {sequence_sql("i.partition_id", "coalesce(c.last_counter, 0)")}
         + row_number() OVER (PARTITION BY i.partition_id ORDER BY i._v, i.batch_index)
         AS sequence_number
  FROM inbox i LEFT JOIN cursors c ON i.partition_id = c.partition_id
  WHERE c.partition_id IS NULL  -- no p row yet: the cursor has passed nothing
     OR i._v > c.cursor_version OR (i._v = c.cursor_version AND i.batch_index > c.cursor_index)
),
pending AS (  -- a transaction's rows are messages once it committed (S12.2)
  SELECT * FROM numbered WHERE NOT {_TX} OR send_id IN (SELECT send_id FROM committed)
){window_ctes}
SELECT sequence_number, partition_id, {fields},
       CASE WHEN {dead} THEN 'Active'
            WHEN scheduled_enqueue_time_utc > {due} THEN 'Scheduled'
            ELSE 'Active' END AS state,
       CASE WHEN {dead} THEN '{SubQueue.DEAD_LETTER.view_name}'
            ELSE '{SubQueue.MAIN.view_name}' END AS sub_queue,
       0 AS delivery_count, CAST(NULL AS STRING) AS lock_token,
       CAST(NULL AS TIMESTAMP) AS locked_until_utc,
       CASE WHEN {dead} THEN '{SESSIONLESS_REASON}' END AS dead_letter_reason,
       CAST(NULL AS STRING) AS dead_letter_error_description,
       CAST(NULL AS STRING) AS dead_letter_source
FROM pending
{window_branch}UNION ALL
SELECT m.sequence_number, m.partition_id, {inbox_fields},
       -- a schedule passed by a cursor is due by the clock, not at the next receive (S8.4)
       CASE WHEN m.state = 'Scheduled' AND NOT i.scheduled_enqueue_time_utc > {due}
            THEN 'Active' ELSE m.state END AS state,
       {view_name_sql("m.lane")} AS sub_queue,
       m.delivery_count, m.lock_token, m.locked_until_utc, m.dead_letter_reason,
       m.dead_letter_error_description, m.dead_letter_source
FROM {ledger.sql_name} m
JOIN inbox i ON m.partition_id = i.partition_id AND m.segment = i.segment
             AND m.send_id = i.send_id AND m.batch_index = i.batch_index
LEFT ANTI JOIN records r ON m.partition_id = r.partition_id AND m.lane = r.lane
             AND m.sequence_number = r.sequence_number AND m.lock_token = r.lock_token
             AND {to_sql(completed_by_record())}
WHERE m.row_type = 'm'
){waiting}
"""


def _window_parts(ledger: Ledger, fields: str) -> tuple[str, str]:
    """The view's CTEs and UNION branch for the messages of forwarding windows (decision
    017): passed by the cursor, not yet written, shown in Transfer under the step's token,
    numbered from the window's start as the step numbers them."""
    ctes = f""",
windows AS (
  SELECT partition_id AS w_partition, cursor_version AS w_from_v, cursor_index AS w_from_i,
         segment AS w_to_v, batch_index AS w_to_i, last_counter AS w_counter,
         lock_token AS w_token, locked_until_utc AS w_until, lane AS w_lane,
         delivery_count AS w_deliveries
  FROM {ledger.sql_name} WHERE row_type = '{WINDOW}'
),
in_windows AS (
  SELECT i.*, {sequence_sql("i.partition_id", "w.w_counter")}
         + row_number() OVER (PARTITION BY w.w_partition, w.w_counter
                              ORDER BY i._v, i.batch_index) AS sequence_number,
         w.w_token, w.w_until, w.w_lane, w.w_deliveries
  FROM inbox i JOIN windows w ON i.partition_id = w.w_partition
   AND (i._v > w.w_from_v OR (i._v = w.w_from_v AND i.batch_index > w.w_from_i))
   AND (i._v < w.w_to_v OR (i._v = w.w_to_v AND i.batch_index <= w.w_to_i))
)"""
    branch = f"""UNION ALL
SELECT sequence_number, partition_id, {fields}, 'Active' AS state,
       {view_name_sql("w_lane")} AS sub_queue, w_deliveries AS delivery_count,
       w_token AS lock_token,
       w_until AS locked_until_utc, CAST(NULL AS STRING) AS dead_letter_reason,
       CAST(NULL AS STRING) AS dead_letter_error_description,
       CAST(NULL AS STRING) AS dead_letter_source
FROM in_windows
"""
    return ctes, branch


def messages(inbox: Inbox, ledger: Ledger, internal: bool = False,
             dedupe: timedelta | None = None, target: str | None = None) -> DataFrame:
    """Every message of the entity, as its Spark SQL view shows it at the clock's now (the
    windows' part only where the ledger may hold a window: read on the driver)."""
    return ledger.spark.sql(messages_sql(inbox, ledger, internal, dedupe, target, utcnow(),
                                         windows=may_hold_windows(ledger)))


def may_hold_windows(ledger: Ledger, lanes: Sequence[str] = (Lane.TRANSFER, Lane.MAIN)
                     ) -> bool:
    """Whether ``lanes`` may hold a ``w`` row (a forwarding window, a range lock): a driver
    read, True where it cannot tell, so that a reader pays for windows only where they
    may be."""
    found = ledger.scan_here({"lane": list(lanes)}, ["row_type"],
                             lambda r: r["row_type"] == WINDOW)
    return found is None or bool(found)


def count_messages(view: DataFrame, forwarding: bool = False) -> dict[str, int]:
    """``engine.reads.tally.tally`` of an entity's messages read through its view; one query."""
    rows = view.groupBy("sub_queue", "state").agg(
        F.count(F.lit(1)).alias("n"), F.sum("size_in_bytes").alias("bytes")).collect()
    return tally(((r["sub_queue"], r["state"], int(r["n"]), int(r["bytes"] or 0))
                  for r in rows), forwarding)


def count_partitions(view: DataFrame, partitions: int, forwarding: bool = False
                     ) -> dict[int, dict[str, int]]:
    """``engine.reads.tally.tally_by_partition`` of an entity's messages read through its
    view; one query."""
    rows = view.groupBy("partition_id", "sub_queue", "state").agg(
        F.count(F.lit(1)).alias("n"), F.sum("size_in_bytes").alias("bytes")).collect()
    return tally_by_partition(((int(r["partition_id"]), r["sub_queue"], r["state"], int(r["n"]),
                                int(r["bytes"] or 0)) for r in rows), partitions, forwarding)


def last_commit(tables: list[Inbox | Ledger]) -> datetime | None:
    """The newest commit time of these tables, from their Delta logs (no data file)."""
    found = [at for at in (table.committed_at() for table in tables) if at is not None]
    return max(found) if found else None


def inbox_bound(inbox: Inbox) -> int:
    """An upper bound of the bytes an entity holds: every inbox row (held or not) times the
    largest message. COUNT and MAX over a statistics column are answered from the Delta log
    (``size_in_bytes`` has statistics for this), so no data file is read."""
    here = inbox.stats_here("size_in_bytes")  # on the driver where the inbox is local
    row = here if here is not None else inbox.spark.sql(
        f"SELECT count(*), max(size_in_bytes) FROM {inbox.sql_name}").first()
    if row is None or not row[0]:
        return 0
    return int(row[0]) * int(row[1] or 0)
