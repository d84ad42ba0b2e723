"""An entity's messages as its SQL view shows them, read on the driver (no Spark job).

Why: a Python data source (``sbqueue.datasource``) reads in workers that have no
SparkSession, so the view's SELECT (``engine.reads.view.messages_sql``) cannot run there. The
same rows are built here from delta-rs reads of the two tables, with the rules the view
applies and ``engine.reads.tally`` already applies to count them:

- a ledger message row, unless a valid completion record names its lock token, with its
  inbox row's fields, its lane's sub-queue, and a schedule passed by a cursor shown Active
  once due (S8.4);
- the inbox rows after a partition's cursor, numbered as the view numbers them: the
  cursor's counter plus their rank in commit order (S3.1), counting a transaction's rows
  still committing, which are left out until it commits (S12.2); a subscription's copy
  marked at fan-out is in its dead-letter queue (S10.1), and a subscription never shows a
  scheduled message (S8.5).

Duplicate detection and forwarding windows are the view's alone: for them, and where a
table is not local or too large to read here, the functions return None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from sbqueue.core.sequence import sequence_of
from sbqueue.core.subqueues import SubQueue
from sbqueue.core.transitions import SESSIONLESS_REASON
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.reads.tally import ahead, completed, locator, records_of, rows_at, view_name
from sbqueue.engine.receive.attempt import cursors_of, is_after
from sbqueue.engine.schema import (
    MESSAGE_FIELDS,
    STATE_FIELDS,
    TRANSACTION_SEND_PREFIX,
    WINDOW,
    dead_letter_mark,
    owns,
)
from sbqueue.store.thresholds import ROW_LIMIT

__all__ = ["LOCATOR", "VIEW_SCHEMA", "view_rows_here", "with_payloads"]

Row = dict[str, Any]
_FIELDS = [f.name for f in MESSAGE_FIELDS]
_LOCATOR = ["partition_id", "segment", "send_id", "batch_index"]
_INBOX = [*_LOCATOR, *_FIELDS, "targets"]
_PAYLOAD = ["body", "application_properties"]  # the wide columns a narrow read leaves out
_NARROW = [c for c in _INBOX if c not in _PAYLOAD]
LOCATOR = "_locator"  # a narrow row's key: its inbox row's (partition, segment, send, index)
_UNHELD = {"delivery_count": 0, "lock_token": None, "locked_until_utc": None,
           "dead_letter_reason": None, "dead_letter_error_description": None,
           "dead_letter_source": None}
_STATE = list(_UNHELD)

VIEW_SCHEMA = StructType([
    StructField("sequence_number", LongType()), StructField("partition_id", IntegerType()),
    *MESSAGE_FIELDS, StructField("state", StringType()), StructField("sub_queue", StringType()),
    *[f for f in STATE_FIELDS if f.name != "state"]])
"""The view's columns (``reads.MESSAGE_VIEW_COLUMNS``) and types."""


def view_rows_here(inbox: Inbox, ledger: Ledger, partitions: Sequence[int],
                   target: str | None, now: datetime, narrow: bool = False,
                   internal: bool = False) -> list[Row] | None:
    """The view's rows of ``partitions`` (``reads.MESSAGE_VIEW_COLUMNS``, and each inbox
    row's ``_send_id`` and ``_batch_index``); None where the caller must ask Spark (see the
    module's docstring). ``narrow``: without bodies and application properties (None),
    each row with its inbox row's ``LOCATOR`` instead, for a caller that keeps a few rows
    and reads only theirs (``with_payloads``). ``internal``: a subscription's scheduled
    copies kept, as ``Entity.messages(internal=True)`` keeps them (a topic's cancel)."""
    rows = ledger.scan_here({"partition_id": list(partitions)}, None, lambda r: True)
    if rows is None or any(r["row_type"] == WINDOW for r in rows):
        return None
    messages = [r for r in rows if r["row_type"] == "m"]
    columns = _NARROW if narrow else _INBOX
    bodies = rows_at(inbox, {locator(r) for r in messages}, columns)
    pending = _numbered(inbox, rows, partitions, target, columns)
    if bodies is None or pending is None:
        return None
    records = records_of(rows)
    out = [v for v in (_stored(r, bodies, records, now) for r in messages) if v is not None]
    out += [_waiting(r, target, now) for r in pending]
    if target is not None and not internal:
        out = [v for v in out if v["state"] != "Scheduled"]  # S8.5
    return out


def with_payloads(inbox: Inbox, rows: list[Row]) -> list[Row] | None:
    """``narrow`` view rows with their bodies and application properties read (only
    theirs); None where they cannot be read here."""
    wanted = {r[LOCATOR] for r in rows}
    payloads = rows_at(inbox, wanted, [*_LOCATOR, *_PAYLOAD])
    if payloads is None or not wanted <= payloads.keys():
        return None  # gone meanwhile (a maintenance pass): the view decides
    return [{k: v for k, v in r.items() if k != LOCATOR}
            | {f: payloads[r[LOCATOR]][f] for f in _PAYLOAD} for r in rows]


def _numbered(inbox: Inbox, rows: list[Row], partitions: Sequence[int], target: str | None,
              columns: list[str]) -> list[Row] | None:
    """The inbox rows after the cursors that are messages, each with its number."""
    cursors = cursors_of(rows, partitions)
    counters = {c.partition: c.counter for c in cursors}
    committed = frozenset(str(r["send_id"]) for r in rows if r["row_type"] == "t")
    after = is_after(cursors)
    start = min(c.version for c in cursors)
    found = inbox.appended_here(start - 1, inbox.version(), columns,
                                lambda r: owns(target, r["targets"]) and after(r),
                                ("_commit_version", "batch_index"), ROW_LIMIT)
    if found is None or len(found) >= ROW_LIMIT:
        return None
    out = []
    for row in found:  # in commit order: each partition's rank is its count so far
        partition = int(row["partition_id"])
        counters[partition] += 1
        send = str(row["send_id"])
        if send.startswith(TRANSACTION_SEND_PREFIX) and send not in committed:
            continue  # numbered, not shown, until its transaction commits (S12.2)
        out.append({**row, "sequence_number": sequence_of(partition, counters[partition])})
    return out


def _shown(message: Mapping[str, Any], sequence_number: int, state: str, sub_queue: str,
           held: Mapping[str, Any]) -> Row:
    shown = {"sequence_number": sequence_number, "partition_id": int(message["partition_id"]),
             **{f: message.get(f) for f in _FIELDS}, "state": state, "sub_queue": sub_queue,
             **{f: held.get(f) for f in _STATE},
             "_send_id": message["send_id"], "_batch_index": int(message["batch_index"])}
    if "body" not in message:  # a narrow read: where the payload is, for ``with_payloads``
        shown[LOCATOR] = locator(message)
    return shown


def _stored(row: Row, bodies: Mapping[tuple[int, int, str, int], Row],
            records: Mapping[tuple[int, int, str], datetime], now: datetime) -> Row | None:
    body = bodies.get(locator(row))
    if body is None or completed(row, records):
        return None
    state = str(row["state"])
    if state == "Scheduled" and not ahead(body, now):
        state = "Active"  # S8.4
    return _shown(body, int(row["sequence_number"]), state, view_name(row["lane"]), row)


def _waiting(row: Row, target: str | None, now: datetime) -> Row:
    dead = target is not None and dead_letter_mark(target) in (row["targets"] or ())
    state = "Scheduled" if not dead and ahead(row, now) else "Active"
    sub_queue = SubQueue.DEAD_LETTER if dead else SubQueue.MAIN
    return _shown(row, int(row["sequence_number"]), state, sub_queue.view_name,
                  {**_UNHELD, "dead_letter_reason": SESSIONLESS_REASON if dead else None})
