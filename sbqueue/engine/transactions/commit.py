"""Committing a transaction (SPEC S12): everything at one point, one Delta commit.

Data flow (docs/decisions/008-transactions.md):

1. Check: every settlement's lock (the rows read by sequence number, ``settle_valid``), the
   session lock of a state change, the transaction's age, and (duplicate detection) which
   of its messages are already known. A failure here writes nothing.
2. Append the messages to the inbox under a send id ``tx-...``: the rows are invisible to
   receives, peek and the SQL view; their sequence numbers are reserved.
3. One guarded MERGE into the transaction's ledger partition: the settlements
   (``settle_outcome`` evaluated on the rows as read), the session state, the commit
   marker (a ``t`` row naming the send id: from here on the messages exist) and the
   partition's cursor row, whose version the MERGE expects, so that a receive that passed
   the rows as void (too old to commit) and this commit can never both succeed.

A crash before 3 leaves only invisible rows, which receives pass as void once the
transaction can no longer commit (``receive.PENDING``); a crash after 3 has committed all.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.duplicates import dedupe_window
from sbqueue.core.sequence import cursor_key, partition_of, row_key
from sbqueue.core.transactions import TIMEOUT
from sbqueue.core.transitions import (
    RECORD_AT,
    Lane,
    SettleContext,
    completed_by_record,
    settle_outcome,
    settle_valid,
)
from sbqueue.engine.receive.attempt import (
    PENDING,
    as_aware,
    cursor_expect,
    first_cursor,
    lock_stamp,
)
from sbqueue.engine.records import no_record_guard, record_rows
from sbqueue.engine.schema import RECORD, TRANSACTION_SEND_PREFIX, ledger_row
from sbqueue.engine.send import ops as send_ops
from sbqueue.engine.send.small import Outgoing
from sbqueue.engine.sessions.ops import SessionLock, Sessions
from sbqueue.engine.settle import ops as settle_ops
from sbqueue.exceptions import (
    MessageAlreadySettled,
    MessageLockLostError,
    OperationTimeoutError,
    SessionLockLostError,
    StorageConflictError,
)
from sbqueue.store.guarded import EXPECT_COLUMN, OP_COLUMN, RETRYABLE, note_conflict

if TYPE_CHECKING:
    from sbqueue.engine.handle import EntityHandle

__all__ = ["Settlement", "TransactionPlan", "TransactionResult", "commit_transaction"]

COMMIT_MARGIN = timedelta(seconds=30)  # the MERGE starts this long before rows turn void
COMMIT_ATTEMPTS = 12


@dataclass(frozen=True)
class Settlement:
    sequence_number: int
    lock_token: str
    kind: str  # complete | abandon | defer | dead_letter | renew
    lanes: tuple[str, ...]
    reason: str | None = None
    description: str | None = None
    session: bool = False  # a session message: a lost lock is the session's (S10.3)


@dataclass
class TransactionPlan:
    """Everything one transaction does, on one partition of one entity."""

    partition: int
    started: datetime
    sends: DataFrame | None = None  # the messages as a DataFrame, or (the client):
    outgoing: Sequence[Outgoing] | None = None  # as the driver send takes them, with
    frame: Callable[[], DataFrame] | None = None  # their DataFrame, built if Spark sends
    send_bytes: int = 0
    message_ids: list[str] = field(default_factory=list)
    settlements: list[Settlement] = field(default_factory=list)
    state: tuple[SessionLock, bytes | None] | None = None


@dataclass(frozen=True)
class TransactionResult:
    send_id: str | None
    dropped: list[str]  # message ids already known: duplicates, not sent (S11)
    renewed_until: datetime | None


def _read_settled(entity: EntityHandle, plan: TransactionPlan) -> dict[int, dict[str, Any]]:
    """The ledger rows of the settled messages, by sequence number."""
    if not plan.settlements:
        return {}
    seqs = sorted({s.sequence_number for s in plan.settlements})
    lanes = sorted({lane for s in plan.settlements for lane in s.lanes})
    parts, wanted = sorted({partition_of(s) for s in seqs}), set(seqs)
    read = entity.ledger.scan_here(
        {"partition_id": parts}, None,
        lambda r: r["sequence_number"] in wanted and (
            (r["row_type"] == "m" and r["lane"] in lanes) or r["row_type"] == RECORD))
    if read is None:
        read = [as_aware(r) for r in entity.ledger.rows(
            F.col("partition_id").isin(parts) & F.col("sequence_number").isin(seqs)
            & (((F.col("row_type") == "m") & F.col("lane").isin(lanes))
               | (F.col("row_type") == RECORD))).collect()]
    # A message its holder completed outside the transaction (a completion record,
    # decision 011) is settled already, though its row is still there.
    recorded = {(seq, token): at for _, seq, token, at in record_rows(read)}
    found = {}
    for row in read:
        at = recorded.get((row["sequence_number"], row["lock_token"]))
        if row["row_type"] == "m" and not (
                at is not None and completed_by_record().evaluate({**row, RECORD_AT: at})):
            found[int(row["sequence_number"])] = row
    return found


@dataclass(frozen=True)
class _Read:
    """What the commit checks, as read: the settled rows and the session's row."""

    settled: dict[int, dict[str, Any]]
    session: dict[str, Any] | None


def _read(entity: EntityHandle, plan: TransactionPlan) -> _Read:
    session = None
    if plan.state is not None:
        session = Sessions(entity).held_row(plan.state[0])
    return _Read(_read_settled(entity, plan), session)


def _settled_rows(entity: EntityHandle, plan: TransactionPlan, found: dict[int, dict[str, Any]],
                  now: datetime) -> tuple[list[dict[str, Any]], datetime | None]:
    """The settlements as changed rows; raises (nothing written) if one is not valid."""
    renewed = lock_stamp(now, entity.props.lock_duration, 0.0)
    out = []
    for s in plan.settlements:
        row = found.get(s.sequence_number)
        if row is None:
            raise MessageAlreadySettled(
                f"message {s.sequence_number} was settled already; the transaction commits "
                "nothing (S6.6, S12.2)")
        if not settle_valid(now).evaluate({**row, "_token": s.lock_token}):
            error = SessionLockLostError if s.session else MessageLockLostError
            raise error(f"the lock on message {s.sequence_number} is no longer valid; the "
                        "transaction commits nothing (S6.6, S12.2)")
        ctx = SettleContext(now=now, kind=s.kind,
                            max_delivery_count=entity.props.max_delivery_count,
                            renewed_until=renewed, reason=s.reason, description=s.description)
        outcome = settle_outcome(ctx)
        changed = {**row, **{k: v.evaluate(row) for k, v in outcome.items()
                             if not k.startswith("_")}}
        changed.update({EXPECT_COLUMN: row["row_version"], OP_COLUMN: outcome["_op"].evaluate(row)})
        out.append(changed)
        if row["lane"] == Lane.MAIN:  # a record landing after the read fails the commit
            out.append(no_record_guard(row["partition_id"], Lane.MAIN,
                                       row["sequence_number"], row["lock_token"]))
    return out, renewed if any(s.kind == "renew" for s in plan.settlements) else None


def _known_ids(entity: EntityHandle, plan: TransactionPlan, now: datetime) -> list[str]:
    """Message ids of the transaction already sent within the duplicate detection window
    (by a send, or by a committed transaction) (S11.2)."""
    window = dedupe_window(entity.props)
    if window is None or not plan.message_ids:
        return []
    since = F.lit(now - window).cast("timestamp")
    committed = [r[0] for r in entity.ledger.rows(
        (F.col("partition_id") == plan.partition) & (F.col("row_type") == "t"))
        .select("send_id").collect()]
    tx = F.col("send_id").startswith(TRANSACTION_SEND_PREFIX)
    rows = (entity.inbox.rows((F.col("partition_id") == plan.partition) & F.col("targets").isNull()
                   & F.col("message_id").isin(plan.message_ids)
                   & (F.col("enqueued_time_utc") >= since)
                   & (~tx | F.col("send_id").isin(committed)))
            .select("message_id").distinct().collect())
    return sorted(str(r[0]) for r in rows)


def _cursor_row(entity: EntityHandle, partition: int) -> dict[str, Any]:
    """The partition's p row to commit with the marker, expecting the version read (no
    p row yet: its first cursor, expected absent)."""
    rows = entity.ledger.scan_here({"partition_id": [partition], "lane": [Lane.MAIN]}, None,
                                   lambda r: r["row_type"] == "p")
    if rows is None:
        rows = [as_aware(r) for r in
                entity.ledger.cursors().where(F.col("partition_id") == partition).collect()]
    first = first_cursor(partition)
    row = rows[0] if rows else ledger_row(
        partition_id=partition, lane=Lane.MAIN, sequence_number=cursor_key(partition),
        row_type="p", row_version=first.p_version, cursor_version=first.version,
        cursor_index=first.position, last_counter=first.counter)
    row.update({EXPECT_COLUMN: cursor_expect(row["row_version"]), OP_COLUMN: "upsert",
                "row_version": row["row_version"] + 1})
    return row


def _send(entity: EntityHandle, plan: TransactionPlan, dropped: list[str], send_id: str) -> int:
    """Append the transaction's messages but the ``dropped`` duplicates (pending until its
    marker commits, decision 008): on the driver where the client's send would be
    (``Entity.send_messages``), else as a DataFrame; the inbox version that holds them."""

    def frame() -> DataFrame:
        sends = plan.frame() if plan.frame is not None else plan.sends
        assert sends is not None, "a transaction's sends need a DataFrame to fall back on"
        return sends.where(~F.col("message_id").isin(dropped)) if dropped else sends

    if plan.outgoing is not None:
        kept = [m for m in plan.outgoing if m["message_id"] not in dropped]
        result = send_ops.send_messages(entity, kept, plan.send_bytes, frame, send_id=send_id)
    else:
        result = send_ops.send_dataframe(entity, frame(), incoming_bytes=plan.send_bytes,
                                       send_id=send_id, in_send_order=True)
    if result.version is not None:
        return result.version
    return _append_version(entity, plan.partition, send_id)


def _append_version(entity: EntityHandle, partition: int, send_id: str) -> int:
    """The inbox commit that holds the transaction's rows (data skipping on send_id)."""
    row = (entity.inbox.in_order((F.col("partition_id") == partition)
                                 & (F.col("send_id") == send_id))
           .select(F.max("v")).first())
    return int(row[0]) if row and row[0] is not None else entity.inbox.version()


def _marker(partition: int, send_id: str, now: datetime, version: int) -> dict[str, Any]:
    return {"partition_id": partition, "lane": Lane.MAIN, "row_type": "t",
            "sequence_number": row_key("t", send_id), "row_version": 1, "send_id": send_id,
            "enqueued_time_utc": now, "cursor_version": version,
            EXPECT_COLUMN: None, OP_COLUMN: "upsert"}


def _state_row(entity: EntityHandle, plan: TransactionPlan, read: dict[str, Any] | None
               ) -> list[dict[str, Any]]:
    """The session row with its new state, if the lock still holds (checked again now)."""
    if plan.state is None:
        return []
    lock, data = plan.state
    sessions = Sessions(entity)
    row = sessions.held_row(lock, read)
    return [sessions.state_row(lock.session_id, row, data)]


def commit_transaction(entity: EntityHandle, plan: TransactionPlan, crash: Any = None
                       ) -> TransactionResult:
    """Commit ``plan`` at one point or not at all (S12.2). ``crash``: a test's hook, called
    with the step name before each step (the kill tests)."""
    step = crash or (lambda _: None)
    now = utcnow()
    if now - plan.started > TIMEOUT:
        raise OperationTimeoutError(
            f"the transaction began at {plan.started}, more than {TIMEOUT} ago; nothing of "
            "it was committed (S12.4)")
    sending = plan.sends is not None or plan.outgoing is not None
    if sending:
        entity.check_status("send")
    if plan.settlements or plan.state is not None:
        entity.check_status("receive")
    entity.require_available([plan.partition], "transaction")
    settle_ops.materialize_ranges(
        entity, [(s.sequence_number, s.lock_token) for s in plan.settlements])
    read = _read(entity, plan)  # fails (nothing written) if the session lock is lost
    _settled_rows(entity, plan, read.settled, now)  # fail before writing anything
    dropped = _known_ids(entity, plan, now)
    send_id, appended_at, version = None, now, None
    step("before_append")
    all_known = bool(dropped) and set(dropped) >= set(plan.message_ids)
    if sending and not all_known:
        send_id = f"{TRANSACTION_SEND_PREFIX}{uuid.uuid4().hex}"
        appended_at = utcnow()
        version = _send(entity, plan, dropped, send_id)
    step("before_commit")
    renewed = _commit(entity, plan, read, send_id, version, appended_at, step)
    step("after_commit")
    return TransactionResult(send_id=send_id, dropped=dropped, renewed_until=renewed)


def _commit(entity: EntityHandle, plan: TransactionPlan, read: _Read, send_id: str | None,
            version: int | None, appended_at: datetime, step: Any) -> datetime | None:
    """The one MERGE, retried on a conflict with the checks re-run, until the appended rows
    come too close to turning void. The first attempt checks the rows read before the
    append again at its own time (the MERGE's guard catches any that changed since); a
    retry reads them anew."""
    with entity.board.hold([plan.partition]):
        for attempt in range(COMMIT_ATTEMPTS):
            now = utcnow()
            if send_id is not None and now - appended_at > PENDING - COMMIT_MARGIN:
                raise OperationTimeoutError(
                    "the transaction could not commit in time; nothing of it was committed "
                    "(S12.4)")
            if attempt:
                read = _read(entity, plan)
            settled, renewed = _settled_rows(entity, plan, read.settled, now)
            rows = [*settled, *_state_row(entity, plan, read.session)]
            lanes = {Lane.MAIN, *(lane for s in plan.settlements for lane in s.lanes)}
            if plan.state is not None:
                lanes.add(Lane.SESSION)
            if send_id is not None:
                cursor = _cursor_row(entity, plan.partition)
                if int(cursor["cursor_version"]) >= (version or 0):
                    raise OperationTimeoutError(  # passed as void: it can never commit now
                        "the transaction's messages were given up before it committed; "
                        "nothing of it was committed (S12.4)")
                rows += [cursor, _marker(plan.partition, send_id, now, version or 0)]
            if not rows:
                return None
            try:
                step("during_commit")
                entity.ledger.merge_rows(rows, [plan.partition], lanes)
                return renewed
            except RETRYABLE as exc:
                note_conflict(f"transaction on {entity.path}", exc)
                time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))
    raise StorageConflictError(
        f"the transaction on {entity.path} conflicted with concurrent work "
        f"{COMMIT_ATTEMPTS} times; nothing of it was committed")

