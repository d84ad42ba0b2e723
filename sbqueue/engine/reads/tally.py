"""An entity's message counts read on the driver: runtime properties without a Spark job.

Why: ``counts()`` through the SQL view is a full read of the inbox and the ledger, 13-14
Spark jobs and 4-6 s on this machine, for a number an operator (and every test, and the
soak's checker) asks for often. Where both tables are local and small, the same rows are
read here with delta-rs and classified as the view classifies them (``engine.reads.view``):

- a ledger message row is held unless a valid completion record names its lock token
  (``completed_by_record``); its sub-queue is its lane's, and a schedule passed by a
  cursor is Active once due (S8.4);
- an inbox row after its partition's cursor is held (a transaction's once it committed,
  S12.2), in the main queue, or (a subscription's copy marked at fan-out) in the
  dead-letter queue (S10.1); Scheduled while its time is ahead.

The ledger is read before the inbox, so a receive that commits in between is seen before
it (its rows still after the old cursors) and nothing is counted twice. Where the view
holds what this module does not rebuild (duplicate detection, forwarding windows), or the
tables are not local or too large, it returns None and the caller counts with Spark.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sbqueue.core.subqueues import TRANSFER_VIEW_NAME, SubQueue
from sbqueue.core.transitions import RECORD_AT, Lane, completed_by_record
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.receive.attempt import cursors_of, is_after
from sbqueue.engine.records import record_rows
from sbqueue.engine.schema import (
    TRANSACTION_SEND_PREFIX,
    WINDOW,
    dead_letter_mark,
    owns,
)
from sbqueue.store.thresholds import ROW_LIMIT

__all__ = ["Held", "ahead", "completed", "held_here", "locator", "per_partition", "records_of",
           "rows_at", "tally", "tally_by_partition", "view_name"]

Held = tuple[int, str, str, int]
"""(partition, view ``sub_queue``, view ``state``, size in bytes) of one message."""

_LEDGER = ["row_type", "partition_id", "lane", "sequence_number", "state", "lock_token",
           "locked_until_utc", "segment", "send_id", "batch_index", "cursor_version",
           "cursor_index", "last_counter", "row_version", "enqueued_time_utc"]
_INBOX = ["partition_id", "segment", "send_id", "batch_index", "size_in_bytes",
          "scheduled_enqueue_time_utc", "targets"]
_VIEW_NAMES = {s.lane: s.view_name for s in SubQueue} | {Lane.TRANSFER: TRANSFER_VIEW_NAME}
_COMPLETED = completed_by_record()  # built once: it is evaluated on every message row


def tally(held: Iterable[tuple[str, str, int, int]], forwarding: bool) -> dict[str, int]:
    """Counts by kind (S16.2: ``active`` is Active and Deferred, locked or not) and bytes,
    from (sub_queue, state, messages, bytes) groups. Messages claimed by a forwarding step
    (``Transfer``) count as transfer; on a ``forwarding`` entity so do those still waiting
    for the step (S13.2)."""
    counts = dict.fromkeys(("active", "scheduled", "dead_letter", "transfer_dead_letter",
                            "transfer"), 0)
    size = 0
    for sub_queue, state, n, nbytes in held:
        size += nbytes
        if sub_queue == SubQueue.DEAD_LETTER.view_name:
            counts["dead_letter"] += n
        elif sub_queue == SubQueue.TRANSFER_DEAD_LETTER.view_name:
            counts["transfer_dead_letter"] += n
        elif state == "Scheduled":
            counts["scheduled"] += n
        elif sub_queue == TRANSFER_VIEW_NAME or forwarding:
            counts["transfer"] += n
        else:
            counts["active"] += n
    counts["total"] = sum(counts.values())
    counts["size_in_bytes"] = size
    return counts


def held_here(inbox: Inbox, ledger: Ledger, partitions: int, target: str | None,
              now: datetime) -> list[Held] | None:
    """Every message the entity holds, as the view classifies it; None where the caller
    must ask Spark (see the module's docstring)."""
    every = {"partition_id": list(range(partitions))}
    rows = ledger.scan_here(every, _LEDGER, lambda r: True)
    if rows is None or any(r["row_type"] == WINDOW for r in rows):
        return None
    messages = [r for r in rows if r["row_type"] == "m"]
    pending = _pending(inbox, rows, partitions, target)
    bodies = _bodies(inbox, messages)
    if pending is None or bodies is None:
        return None
    subscription, records = target is not None, records_of(rows)
    out = [h for h in (_stored(r, bodies, records, now) for r in messages) if h is not None]
    out += [_waiting(r, target, now) for r in pending]
    return [h for h in out if not (subscription and h[2] == "Scheduled")]  # S8.5


def records_of(rows: list[dict[str, Any]]) -> dict[tuple[int, int, str], datetime]:
    """When each valid-looking completion record was written, by (partition, sequence
    number, lock token)."""
    return {(p, s, t): at for p, s, t, at in record_rows(rows)}


def completed(row: Mapping[str, Any], records: Mapping[tuple[int, int, str], datetime]
              ) -> bool:
    """Whether a record completed this ledger message row (``completed_by_record``)."""
    token = row["lock_token"]
    key = (int(row["partition_id"]), int(row["sequence_number"]), str(token))
    at = records.get(key) if token is not None else None
    return _COMPLETED.evaluate({**row, RECORD_AT: at}) is True


def view_name(lane: Any) -> str:
    """The view's ``sub_queue`` of a ledger lane."""
    return _VIEW_NAMES.get(str(lane), "Main")


def locator(row: Mapping[str, Any]) -> tuple[int, int, str, int]:
    """Where a message's inbox row is: partition, segment, send id, batch index."""
    return (int(row["partition_id"]), int(row["segment"]), str(row["send_id"]),
            int(row["batch_index"]))


def rows_at(inbox: Inbox, wanted: set[tuple[int, int, str, int]], columns: list[str]
            ) -> dict[tuple[int, int, str, int], dict[str, Any]] | None:
    """The inbox rows at these locators (``columns``, which must hold the locator's), by
    locator, read on the driver (only their partitions and segments); None where they
    cannot be read here."""
    if not wanted:
        return {}
    where = {"partition_id": sorted({k[0] for k in wanted}),
             "segment": sorted({k[1] for k in wanted})}
    found = inbox.scan_here(where, columns, lambda r: locator(r) in wanted)
    return None if found is None else {locator(r): r for r in found}


def _bodies(inbox: Inbox, messages: list[dict[str, Any]]
            ) -> dict[tuple[int, int, str, int], dict[str, Any]] | None:
    """The inbox rows of the ledger's messages (their size and schedule), by locator."""
    return rows_at(inbox, {locator(r) for r in messages}, _INBOX)


def _pending(inbox: Inbox, rows: list[dict[str, Any]], partitions: int, target: str | None
             ) -> list[dict[str, Any]] | None:
    """The inbox rows after the cursors that are messages (S3.1, S12.2)."""
    cursors = cursors_of(rows, range(partitions))
    committed = frozenset(str(r["send_id"]) for r in rows if r["row_type"] == "t")
    after = is_after(cursors)

    def keep(r: dict[str, Any]) -> bool:
        send = str(r["send_id"])
        return (owns(target, r["targets"]) and after(r)
                and (not send.startswith(TRANSACTION_SEND_PREFIX) or send in committed))

    start = min(c.version for c in cursors)
    found = inbox.appended_here(start - 1, inbox.version(), _INBOX, keep,
                                ("_commit_version", "batch_index"), ROW_LIMIT)
    return None if found is None or len(found) >= ROW_LIMIT else found


def _stored(row: dict[str, Any], bodies: Mapping[tuple[int, int, str, int], dict[str, Any]],
            records: Mapping[tuple[int, int, str], datetime], now: datetime) -> Held | None:
    """A ledger message as the view shows it; None when it is not held (a record completed
    it, or its inbox row is gone)."""
    body = bodies.get(locator(row))
    if body is None or completed(row, records):
        return None
    state = str(row["state"])
    if state == "Scheduled" and not ahead(body, now):
        state = "Active"
    return (int(row["partition_id"]), view_name(row["lane"]), state,
            int(body["size_in_bytes"] or 0))


def _waiting(row: dict[str, Any], target: str | None, now: datetime) -> Held:
    """An inbox row after its cursor as the view shows it."""
    dead = target is not None and dead_letter_mark(target) in (row["targets"] or ())
    state = "Scheduled" if not dead and ahead(row, now) else "Active"
    sub_queue = SubQueue.DEAD_LETTER if dead else SubQueue.MAIN
    return (int(row["partition_id"]), sub_queue.view_name, state,
            int(row["size_in_bytes"] or 0))


def ahead(row: Mapping[str, Any], now: datetime) -> bool:
    """Whether a row's schedule is still ahead of ``now``."""
    at = row["scheduled_enqueue_time_utc"]
    return at is not None and at > now


def per_partition(held: Iterable[Held], partitions: int) -> dict[int, int]:
    """Messages per partition (all states and sub-queues)."""
    counted = Counter(h[0] for h in held)
    return {p: counted.get(p, 0) for p in range(partitions)}


def tally_by_partition(held: Iterable[tuple[int, str, str, int, int]], partitions: int,
                       forwarding: bool) -> dict[int, dict[str, int]]:
    """``tally`` of each partition (every partition present, empty ones all zero), from
    (partition, sub_queue, state, messages, bytes) groups."""
    groups: dict[int, list[tuple[str, str, int, int]]] = {p: [] for p in range(partitions)}
    for partition, sub_queue, state, n, nbytes in held:
        groups.setdefault(partition, []).append((sub_queue, state, n, nbytes))
    return {p: tally(g, forwarding) for p, g in sorted(groups.items())}
