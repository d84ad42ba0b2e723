"""Sessions of an entity (SPEC S10): exclusive locks, ordered receives, session state.

A session is one ``s`` row in the ledger lane ``session`` of its partition (the partition
its id routes to, S4.1): the holder's lock token, the lock's end and the state. Locking,
releasing and setting state are guarded MERGEs of those rows, scoped to
``(partition, lane 'session')``: they never conflict with the receives and settlements of
the partition (lane ``main``), and two receivers that race for one session cannot both win
(the loser's guard or Delta's conflict check aborts it). The messages a holder receives are
locked until the session lock ends; renewing or releasing the session moves those message
locks in the same commit, so a message lock never outlives or undercuts its session.
Why: docs/decisions/007-sessions.md.
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.routing import partition_for
from sbqueue.core.sequence import row_key
from sbqueue.core.sessions import check_session_id, lockable, session_held, state_bytes
from sbqueue.core.sizes import message_limit
from sbqueue.core.transitions import RECORD_AT, Lane, completed_by_record
from sbqueue.engine.receive.attempt import (
    SESSION_LOOKAHEAD,
    ReceiveResult,
    as_aware,
    collected,
    lock_stamp,
    with_bodies,
)
from sbqueue.engine.receive.on_spark import deliverable_heads
from sbqueue.engine.receive.small import available_here, receive
from sbqueue.engine.records import no_record_guard, record_rows
from sbqueue.engine.schema import RECORD
from sbqueue.exceptions import (
    InvalidOperationError,
    OperationTimeoutError,
    SessionCannotBeLockedError,
    SessionLockLostError,
    StorageConflictError,
)
from sbqueue.store.guarded import (
    EXPECT_COLUMN,
    OP_COLUMN,
    RETRYABLE,
    StaleRead,
    note_conflict,
    retry_conflicts,
)

if TYPE_CHECKING:
    from sbqueue.engine.handle import EntityHandle

__all__ = ["SessionLock", "SessionStateResult", "Sessions"]

_POLL = (0.2, 2.0)  # first and longest pause while waiting for an available session
_SPREAD = 4  # a next-available lock picks among this many of the oldest sessions
_S_COLUMNS = ["session_id", "row_type", "lock_token", "locked_until_utc", "row_version",
              "session_state", "enqueued_time_utc"]


@dataclass(frozen=True)
class SessionLock:
    """A session held by one receiver until ``locked_until``."""

    session_id: str
    partition: int
    token: str
    locked_until: datetime


@dataclass(frozen=True)
class SessionStateResult:
    """Sessions whose state was set, and those whose lock the caller no longer held."""

    set: list[str]
    lock_lost: list[str]


class Sessions:
    """The session operations of one entity (a session queue or subscription)."""

    def __init__(self, entity: EntityHandle) -> None:
        if not entity.props.requires_session or entity.sub_queue.is_dead_letter:
            raise InvalidOperationError(
                f"{entity.path} does not require sessions: receive it without a session "
                "(S10.2)")
        self.entity = entity
        self.spark = entity.spark

    # -- reading s rows --------------------------------------------------------------------
    def partition_of(self, session_id: str) -> int:
        return partition_for(session_id, self.entity.partitions)

    def _rows(self, sessions: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The s rows of these sessions: read on the driver where the ledger is local, else
        with literal partition filters in Spark; times as aware UTC."""
        wanted = sorted(set(sessions))
        if not wanted:
            return {}
        parts = sorted({self.partition_of(s) for s in wanted})
        names = set(wanted)
        here = self.entity.ledger.scan_here(
            {"partition_id": parts, "lane": [Lane.SESSION]}, _S_COLUMNS,
            lambda r: r["row_type"] == "s" and r["session_id"] in names)
        if here is None:
            here = [as_aware(r) for r in self.entity.ledger.sessions(
                F.col("partition_id").isin(parts) & F.col("session_id").isin(wanted)
            ).select(*_S_COLUMNS).collect()]
        return {str(r["session_id"]): r for r in here}

    def get_state(self, session_id: str) -> bytes | None:
        """The state last set, None if never (S10.5); no lock needed, no commit."""
        row = self._rows([check_session_id(session_id)]).get(session_id)
        return None if row is None or row["session_state"] is None else bytes(
            row["session_state"])

    def states(self) -> DataFrame:
        """Every session with a state or a lock: session_id, state, locked_until_utc and
        when the state was last set (``state_updated_utc``)."""
        return (self.entity.ledger.sessions()
                .select("session_id", "partition_id", F.col("session_state").alias("state"),
                        "locked_until_utc",
                        F.col("enqueued_time_utc").alias("state_updated_utc")))

    def listed(self) -> list[dict[str, Any]]:
        """Every session with a state or a lock (its s row: ``session_id``, ``partition_id``,
        ``session_state``, ``locked_until_utc``, ``state_updated_utc``), by id; read on the
        driver where the ledger is local, else with Spark. What the explorer lists."""
        here = self.entity.ledger.scan_here(
            {"partition_id": list(range(self.entity.partitions)), "lane": [Lane.SESSION]},
            [*_S_COLUMNS, "partition_id"], lambda r: r["row_type"] == "s")
        if here is None:
            here = [as_aware(r) for r in self.entity.ledger.sessions().select(
                *_S_COLUMNS, "partition_id").collect()]
        rows = [{"session_id": str(r["session_id"]), "partition_id": int(r["partition_id"]),
                 "session_state": r["session_state"], "locked_until_utc": r["locked_until_utc"],
                 "state_updated_utc": r["enqueued_time_utc"]} for r in here]
        return sorted(rows, key=lambda r: r["session_id"])

    def list_ids(self, state_updated_after: datetime | None = None) -> list[str]:
        """Sessions with messages in the entity or a state (S10.6); with
        ``state_updated_after``, those whose state was set after that time."""
        with_state = self.states().where(F.col("state").isNotNull())
        if state_updated_after is not None:
            recent = with_state.where(F.col("state_updated_utc") > F.lit(state_updated_after))
            return sorted(str(r[0]) for r in recent.select("session_id").collect())
        with_messages = self.entity.messages().where(F.col("session_id").isNotNull()).select(
            "session_id")
        rows = with_messages.union(with_state.select("session_id")).distinct().collect()
        return sorted(str(r[0]) for r in rows)

    # -- committing s rows -----------------------------------------------------------------
    def _commit(self, rows: list[dict[str, Any]], partitions: Iterable[int],
                lanes: tuple[str, ...] = (Lane.SESSION,)) -> None:
        self.entity.ledger.merge_rows(rows, partitions, lanes)

    def s_row(self, session_id: str, read: dict[str, Any] | None, **values: Any) -> dict[str, Any]:
        partition = self.partition_of(session_id)
        row: dict[str, Any] = {
            "partition_id": partition, "lane": Lane.SESSION, "row_type": "s",
            "sequence_number": row_key("s", session_id), "session_id": session_id,
            "row_version": 1 if read is None else int(read["row_version"]) + 1,
            "session_state": None if read is None else read["session_state"],
            EXPECT_COLUMN: None if read is None else int(read["row_version"]),
            OP_COLUMN: "upsert"}
        if read is not None:
            row.update(lock_token=read["lock_token"], locked_until_utc=read["locked_until_utc"],
                       enqueued_time_utc=read.get("enqueued_time_utc"))
        row.update(values)
        return row

    def state_row(self, session_id: str, read: dict[str, Any] | None, state: bytes | None
                  ) -> dict[str, Any]:
        """The s row with a new state, stamped with when it was set (its
        ``enqueued_time_utc``: ``list_*_sessions(state_updated_after=...)``)."""
        return self.s_row(session_id, read, session_state=state, enqueued_time_utc=utcnow())

    # -- locks -----------------------------------------------------------------------------
    def _try_lock(self, session_ids: list[str]) -> list[SessionLock]:
        """Lock those of ``session_ids`` no one holds, in one commit; [] if none is free."""
        now = utcnow()
        read = self._rows(session_ids)
        free = [s for s in session_ids
                if s not in read or lockable(now).evaluate(read[s])]
        if not free:
            return []
        duration = self.entity.props.lock_duration
        stamped = lock_stamp(now, duration, self.entity.board.lock_grace())
        tokens = {s: str(uuid.uuid4()) for s in free}
        self._commit([self.s_row(s, read.get(s), lock_token=tokens[s],
                                  locked_until_utc=stamped) for s in free],
                     {self.partition_of(s) for s in free})
        self.entity.board.saw_attempt((utcnow() - now).total_seconds())
        told = min(stamped, utcnow() + duration)  # the clock starts at the commit (S5.2)
        locks = [SessionLock(s, self.partition_of(s), tokens[s], told) for s in free]
        if told - utcnow() >= duration / 2:
            return locks
        # The commit outlasted the grace (a cold JVM, a loaded machine): renew once, so that
        # the holder starts with most of its lock (S10.3, as S5.2 for messages); a lock that
        # ended before it was granted is taken again (the caller retries).
        try:
            return [self.renew(lock) for lock in locks]
        except SessionLockLostError:
            raise StaleRead("a session lock ended before its commit returned") from None

    def lock(self, session_id: str) -> SessionLock:
        """Take this session; SessionCannotBeLocked if another receiver holds it (S10.2)."""
        check_session_id(session_id)
        self.entity.check_status("receive")

        def attempt() -> list[SessionLock]:
            return self._try_lock([session_id])

        try:
            got = retry_conflicts(attempt, what=f"lock session {session_id!r}", attempts=3)
        except StorageConflictError:  # lost every race: others keep locking it
            got = []
        if not got:
            raise SessionCannotBeLockedError(
                f"session {session_id!r} of {self.entity.path} is locked by another receiver "
                "(S10.2)")
        return got[0]

    def available(self, limit: int) -> list[str]:
        """Up to ``limit`` unlocked sessions with messages available now, oldest first."""
        entity = self.entity
        attempt = replace(entity.make_attempt(list(range(entity.partitions)), 0, 0, True),
                          share=SESSION_LOOKAHEAD)
        here = available_here(entity.ledger, entity.inbox, attempt)
        if here is not None:
            first: dict[str, datetime] = {}
            for row in here:
                sid, at = row["session_id"], row["enqueued_time_utc"]
                if sid is not None and (sid not in first or at < first[sid]):
                    first[str(sid)] = at
            ids = sorted(first, key=lambda s: first[s])[:limit + 64]
        else:
            heads = deliverable_heads(entity.ledger, entity.inbox, attempt)
            ids = [str(r[0]) for r in heads.where(F.col("session_id").isNotNull())
                   .groupBy("session_id").agg(F.min("enqueued_time_utc").alias("t"))
                   .orderBy("t").limit(limit + 64).collect()]
        now = utcnow()
        held = {s for s, r in self._rows(ids).items()
                if not lockable(now).evaluate(r)}
        return [s for s in ids if s not in held][:limit]

    def lock_next(self, wait: float) -> SessionLock:
        """Any unlocked session with available messages (NEXT_AVAILABLE_SESSION); none
        within ``wait`` seconds: OperationTimeout (S10.2)."""
        self.entity.check_status("receive")
        deadline, pause = time.monotonic() + wait, _POLL[0]
        while True:
            got = self._lock_some(1, spread=_SPREAD)
            if got:
                return got[0]
            if time.monotonic() >= deadline:
                raise OperationTimeoutError(
                    f"no session of {self.entity.path} with available messages could be "
                    f"locked within {wait} s (S10.2)")
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, _POLL[1])

    def _lock_some(self, count: int, spread: int = 1) -> list[SessionLock]:
        """Lock up to ``count`` available sessions in one commit (chosen at random among the
        ``count * spread`` oldest, so that competing receivers take different ones)."""
        for _ in range(4):
            ids = self.available(count * spread)
            if not ids:
                return []
            chosen = sorted(random.sample(ids, min(count, len(ids))))
            try:
                got = self._try_lock(chosen)
            except RETRYABLE as exc:
                note_conflict(f"lock sessions of {self.entity.name}", exc)
                time.sleep(random.uniform(0.05, 0.3))
                continue
            if got:
                return got
        return []

    def lock_many(self, count: int) -> list[SessionLock]:
        """Up to ``count`` available sessions, locked in one commit (the DataFrame path)."""
        self.entity.check_status("receive")
        return self._lock_some(count)

    def held_row(self, lock: SessionLock, row: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
        """The session's row, if the lock still holds now; SessionLockLost otherwise.
        ``row``: as read before, to check again without reading."""
        row = row or self._rows([lock.session_id]).get(lock.session_id)
        if row is None or not session_held(lock.token, utcnow()).evaluate(row):
            raise SessionLockLostError(
                f"the lock on session {lock.session_id!r} of {self.entity.path} expired or "
                "was taken over (S10.3)")
        return row

    def _move_message_locks(self, lock: SessionLock, until: datetime | None
                            ) -> list[dict[str, Any]]:
        """The session's messages this holder has locked, with their locks moved to
        ``until`` (None: released, available again). A message a completion record of its
        lock completed is deleted instead: neither a renewal nor a release may void a
        complete (decision 011; the client's session waits for its completes in flight
        before it releases, ``client.session``). For every other one without a record a
        guard row says "no record of this lock": a record landing after this read fails
        the commit, which then reads again."""
        read = self._held_messages(lock)
        recorded = {(p, seq, token): at for p, seq, token, at in record_rows(read)}
        out = []
        for row in (r for r in read if r["row_type"] == "m"):
            at = recorded.get((lock.partition, row["sequence_number"], row["lock_token"]))
            if at is not None and completed_by_record().evaluate({**row, RECORD_AT: at}):
                out.append({**row, EXPECT_COLUMN: row["row_version"], OP_COLUMN: "delete"})
                continue
            out.append({**row, EXPECT_COLUMN: row["row_version"], OP_COLUMN: "upsert",
                        "row_version": row["row_version"] + 1, "locked_until_utc": until,
                        "lock_token": row["lock_token"] if until else None})
            if at is None:  # a record read and not valid stays not valid: no guard
                out.append(no_record_guard(lock.partition, Lane.MAIN, row["sequence_number"],
                                           row["lock_token"]))
        return out

    def _held_messages(self, lock: SessionLock) -> list[dict[str, Any]]:
        """The session's message rows still locked, and the completion records, of its
        partition's main lane: on the driver where it can, else one Spark read."""
        now = utcnow()

        def keep(r: dict[str, Any]) -> bool:
            return r["row_type"] == RECORD or (
                r["row_type"] == "m" and r["session_id"] == lock.session_id
                and r["locked_until_utc"] is not None and r["locked_until_utc"] > now)

        here = self.entity.ledger.scan_here(
            {"partition_id": [lock.partition], "lane": [Lane.MAIN]}, None, keep)
        if here is not None:
            return here
        held = ((F.col("row_type") == "m") & (F.col("session_id") == lock.session_id)
                & (F.col("locked_until_utc") > F.lit(now).cast("timestamp")))
        return [as_aware(r) for r in self.entity.ledger.rows(
            (F.col("partition_id") == lock.partition) & (F.col("lane") == Lane.MAIN)
            & (held | (F.col("row_type") == RECORD))).collect()]

    def _relock(self, lock: SessionLock, until: datetime | None) -> None:
        def attempt() -> None:
            read = self.held_row(lock)
            rows = [self.s_row(lock.session_id, read, locked_until_utc=until,
                                lock_token=lock.token if until else None),
                    *self._move_message_locks(lock, until)]
            lanes = (Lane.SESSION, Lane.MAIN) if len(rows) > 1 else (Lane.SESSION,)
            self._commit(rows, [lock.partition], lanes)

        with self.entity.board.hold([lock.partition]):
            retry_conflicts(attempt, what=f"session {lock.session_id!r} lock")

    def renew(self, lock: SessionLock) -> SessionLock:
        """Extend the session lock (and its messages' locks) to now + lock duration
        (S10.3); SessionLockLost if it ended."""
        duration = self.entity.props.lock_duration
        stamped = lock_stamp(utcnow(), duration, self.entity.board.lock_grace())
        self._relock(lock, stamped)
        return replace(lock, locked_until=min(stamped, utcnow() + duration))  # as in S5.2

    def release(self, lock: SessionLock) -> None:
        """Give the session up: its unsettled messages are available again at once. A lock
        that already ended is left as it is."""
        with contextlib.suppress(SessionLockLostError):
            self._relock(lock, None)

    # -- state -----------------------------------------------------------------------------
    def set_state(self, lock: SessionLock, state: object) -> None:
        """Store the session state (S10.5): only the holder may, one commit."""
        data = state_bytes(state, message_limit(self.entity.max_message_kilobytes))

        def attempt() -> None:
            read = self.held_row(lock)
            self._commit([self.state_row(lock.session_id, read, data)],
                         [lock.partition])

        retry_conflicts(attempt, what=f"set the state of session {lock.session_id!r}")

    def set_states(self, df: DataFrame) -> SessionStateResult:
        """Set the state of each row of ``df`` (session_id, state, session_lock_token) in
        one commit; rows whose lock the caller no longer holds are reported, not set."""
        limit = message_limit(self.entity.max_message_kilobytes)
        wanted = {str(r["session_id"]): (state_bytes(r["state"], limit),
                                         str(r["session_lock_token"]))
                  for r in df.select("session_id", "state", "session_lock_token").collect()}

        def attempt() -> SessionStateResult:
            now, read = utcnow(), self._rows(wanted)
            good = [s for s, (_, token) in wanted.items()
                    if s in read and session_held(token, now).evaluate(read[s])]
            if good:
                self._commit([self.state_row(s, read[s], wanted[s][0])
                              for s in good], {self.partition_of(s) for s in good})
            return SessionStateResult(sorted(good), sorted(set(wanted) - set(good)))

        return retry_conflicts(attempt, what=f"set session states of {self.entity.path}")

    # -- receiving -------------------------------------------------------------------------
    def receive(self, locks: list[SessionLock], share: int, mode: str) -> DataFrame:
        """``receive_result`` as a DataFrame with bodies."""
        if not locks:
            return self.entity.none()
        return with_bodies(self.entity.inbox, self.receive_result(locks, share, mode))

    def receive_rows(self, locks: list[SessionLock], share: int, mode: str) -> list[Row]:
        """``receive_result`` collected (the client's session receive): a receive decided
        on the driver already holds its messages."""
        if not locks:
            return []
        return collected(self.entity.inbox, self.receive_result(locks, share, mode))

    def receive_result(self, locks: list[SessionLock], share: int, mode: str
                       ) -> ReceiveResult:
        """Up to ``share`` messages of each locked session, in sequence order (S10.4), one
        commit; the message locks end with the session lock."""
        now = utcnow()
        lost = [lk.session_id for lk in locks if lk.locked_until <= now]
        if lost:
            raise SessionLockLostError(
                f"the lock on session(s) {lost} of {self.entity.path} ended (S10.3)")
        self.entity.check_status("receive")
        partitions = sorted({lk.partition for lk in locks})
        self.entity.require_available(partitions, "receive")
        ends = min(lk.locked_until for lk in locks)

        def attempt() -> ReceiveResult:
            a = self.entity.make_attempt(partitions, share, share * len(locks),
                                         mode == "peek_lock")
            a = replace(a, sessions=tuple(sorted(lk.session_id for lk in locks)),
                        ctx=replace(a.ctx, locked_until=ends))
            return receive(self.entity.ledger, self.entity.inbox, a, Lane.MAIN)

        with self.entity.board.hold(partitions):
            result = retry_conflicts(attempt, what=f"session receive on {self.entity.path}")
        if result.locked_until is not None:
            result = replace(result, locked_until=ends)
        return result

    def receive_dataframe(self, max_sessions: int, max_messages_per_session: int, mode: str
                          ) -> DataFrame:
        """Lock up to ``max_sessions`` available sessions and receive up to
        ``max_messages_per_session`` of each: the messages with ``session_lock_token`` and
        ``session_locked_until_utc``, so that a job can process each session in order and
        settle, set state or release it."""
        if max_sessions < 1 or max_messages_per_session < 1:
            raise InvalidOperationError(
                f"max_sessions={max_sessions}, max_messages_per_session="
                f"{max_messages_per_session}: each at least 1")
        locks = self.lock_many(max_sessions)
        messages = self.receive(locks, max_messages_per_session, mode)
        held = self.spark.createDataFrame(
            [(lk.session_id, lk.token, lk.locked_until) for lk in locks],
            "session_id string, session_lock_token string, session_locked_until_utc timestamp")
        return messages.join(F.broadcast(held), "session_id", "left")

    def release_all(self, locks: Iterable[SessionLock]) -> None:
        for lock in locks:
            self.release(lock)

    def locks_of(self, df: DataFrame) -> list[SessionLock]:
        """The session locks named by a DataFrame's session_id, session_lock_token and
        session_locked_until_utc columns."""
        rows = df.select("session_id", "session_lock_token", "session_locked_until_utc"
                         ).distinct().collect()
        return [SessionLock(str(r[0]), self.partition_of(str(r[0])), str(r[1]), r[2])
                for r in rows if r[1] is not None]

