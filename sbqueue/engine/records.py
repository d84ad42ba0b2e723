"""Completion records: a ``complete`` as a blind append to the ledger (decision 011).

A record is a ledger row with ``row_type`` 'c' in its message's partition and lane (the
main lane: the lane whose receives fold them, and that nothing else re-locks), keyed
by the message's sequence number and the lock token it was written under; its
``enqueued_time_utc`` says when it was written. ``core.transitions.completed_by_record``
is the rule: it completes its message if the row still has that token and the lock had
not ended when the record was written (``settle_valid`` at the record's time).

Why it is safe without a read: an append never conflicts, and a receive of the same
partition and lane that read before the record landed conflicts with it at commit (the
record's file is in what that receive read, DESIGN fact 2; the ledger's isolation level
is Serializable, under which blind appends conflict too), retries and sees it. So a
receive re-locks a message only if no valid record of it exists; the record order is the
Delta log's. Receives, the SQL view and peek read records in the same scan as the rows;
a receive that commits folds them: it deletes the messages they completed (the receive
outcome) and, on the driver, the records it settled for good with them
(``settled_record_deletes``, decision 049); any other record once it is older than
``RECORD_KEEP``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from sbqueue.engine.columns import sql_literal
from sbqueue.engine.schema import RECORD, ledger_row
from sbqueue.store.guarded import ABSENT, EXPECT_COLUMN, OP_COLUMN

__all__ = ["CLOCK_MARGIN", "FOLD_AGE", "FOLD_AT", "RECORD_BUDGET", "RECORD_KEEP", "Record",
           "no_record_guard", "old_record_deletes", "record_at", "record_rows",
           "records_due", "settled_record_deletes"]

# Records a receive does not settle for good (the Spark executor's folds; a message with
# records of two tokens) stay this long after they were written. A writer that reads back
# (``settle.apply.complete_by_records``) reads the row as of its own commit, not the record.
RECORD_KEEP = timedelta(seconds=60)
# How far apart the clocks of two hosts may be (and a commit's last write may take): a
# writer whose append returned this long before the lock ends knows its record is valid.
CLOCK_MARGIN = timedelta(seconds=2)
# A record is written only while the lock has at least this long left (an append takes
# ~0.2 s here); closer to its end a keyed DELETE decides, as Delta orders it.
RECORD_BUDGET = timedelta(seconds=3)

# A receive on the driver folds the records of a partition it commits nothing else to only
# once this many have gathered there or the oldest is this old (decision 050): folded at
# once, a receive in a loop wrote a second file for the partition of the message completed
# before it (7.2 -> 5.1 ms a one-message receive when deferred). Both bound what each later
# receive reads of them (a record is a ledger row it reads and classifies).
FOLD_AT = 8
FOLD_AGE = timedelta(seconds=2)

Record = tuple[int, int, str, datetime]
"""(partition, sequence number, lock token, written at) of a record as read."""


def record_rows(rows: list[Any]) -> list[Record]:
    """The records among collected ledger rows (``row_type``, ``partition_id``,
    ``sequence_number``, ``lock_token``, ``enqueued_time_utc``); times as aware UTC (Spark
    hands back naive local ones)."""
    earliest: dict[tuple[int, int, str], datetime] = {}
    for r in rows:
        if r["row_type"] == RECORD:  # one holder may have written two (a retried complete)
            key = (int(r["partition_id"]), int(r["sequence_number"]), str(r["lock_token"]))
            at = r["enqueued_time_utc"].astimezone(timezone.utc)
            earliest[key] = min(earliest.get(key, at), at)
    return [(*key, at) for key, at in earliest.items()]


def record_at(records: list[Record]) -> Column:
    """``_record_at`` of ledger rows: when the record naming the row's partition, sequence
    number and current lock token was written; NULL without one. A literal map: records
    live a minute, so a receive sees few."""
    if not records:
        return F.lit(None).cast("timestamp")
    pairs = ", ".join(f"{sql_literal(f'{partition}:{seq}:{token}')}, {sql_literal(at)}"
                      for partition, seq, token, at in records)
    key = "concat_ws(':', CAST(partition_id AS STRING), CAST(sequence_number AS STRING), " \
          "lock_token)"
    return F.expr(f"CAST(CASE WHEN lock_token IS NOT NULL THEN "
                  f"element_at(map({pairs}), {key}) END AS TIMESTAMP)")


def old_record_deletes(records: list[Record], lane: str, now: datetime
                       ) -> list[dict[str, Any]]:
    """Delete rows (EXPECT_COLUMN, OP_COLUMN) of the records written before ``now -
    RECORD_KEEP``: by then the message each completed is gone (folded) or the record counted
    for nothing."""
    return [_deleted(record, lane) for record in records if record[3] < now - RECORD_KEEP]


def _deleted(record: Record, lane: str) -> dict[str, Any]:
    """The change row that deletes ``record`` (expected present, as read)."""
    partition, seq, token, _ = record
    return ledger_row(partition_id=partition, lane=lane, sequence_number=seq, row_type=RECORD,
                      row_version=0, lock_token=token, **{EXPECT_COLUMN: 0, OP_COLUMN: "delete"})


def settled_record_deletes(records: list[Record], read: set[tuple[int, int]], lane: str,
                           now: datetime) -> list[dict[str, Any]]:
    """Delete rows of the records a receive's commit settles for good, besides those older
    than ``RECORD_KEEP``: each record of a message row it read (the row's outcome applies
    the record of its current token; any other token's counts for nothing, ever) and each
    record it folds (``read`` holds the rows read; a message with records of one token
    only). In that commit the record either completed its row, which goes with it, or
    counts for nothing (a token that is not the row's, or a lock that had ended: neither
    comes back). Kept a minute, every receive read each of the last minute's records: at
    20 completes a second, a thousand rows a read. A message with records of two tokens
    keeps them until they are old (the fold takes the newest, which may not count)."""
    tokens: dict[tuple[int, int], set[str]] = {}
    for partition, seq, token, _ in records:
        tokens.setdefault((partition, seq), set()).add(token)
    return [_deleted(record, lane) for record in records
            if record[3] < now - RECORD_KEEP or record[:2] in read
            or len(tokens[record[:2]]) == 1]


def records_due(records: list[Record], written: set[int], now: datetime) -> list[Record]:
    """The records a receive's commit folds (``settled_record_deletes`` and the folds of
    their rows): all of a partition the commit rewrites anyway (``written``: no file more),
    and all of a partition where ``FOLD_AT`` have gathered or one was written before ``now
    - FOLD_AGE``; the others wait for a later receive. A partition's records go together,
    so a message's records of two tokens are judged together."""
    by_partition: dict[int, list[Record]] = {}
    for record in records:
        by_partition.setdefault(record[0], []).append(record)
    return [record for partition, held in by_partition.items()
            if partition in written or len(held) >= FOLD_AT
            or min(r[3] for r in held) < now - FOLD_AGE for record in held]


def no_record_guard(partition: int, lane: str, seq: int, token: str) -> dict[str, Any]:
    """A change row that only checks "no completion record of this lock exists": a row
    changed without its record read fails the MERGE (StaleRead) if one landed meanwhile."""
    return ledger_row(partition_id=partition, lane=lane, sequence_number=seq,
                      row_type=RECORD, row_version=0, lock_token=token,
                      **{EXPECT_COLUMN: None, OP_COLUMN: ABSENT})
