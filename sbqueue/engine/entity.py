"""Operations on one entity as DataFrames: send, receive (lock), settle, peek, count.

The entity is a queue or a subscription, or one of their dead-letter sub-queues (a
subscription reads its topic's inbox, decision 009). ``Entity`` is a facade: what it is
(tables, definition, checks, reads) is ``handle.EntityHandle``; each operation lives in
its module (``send.ops``, ``receive.ops``, ``settle.ops``, ``settle.by_number``,
``reads.peek``, ``sessions.ops``, ``reads.replay``) and takes the handle. Sends append to
the inbox; receives and settlements commit to the ledger partitions they change; reads
never commit. Why this layout: docs/decisions/004-cursor-layout.md and
037-the-house-by-operation.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame, Row

from sbqueue.core.sizes import check_dead_letter_text
from sbqueue.engine.handle import EntityHandle
from sbqueue.engine.reads import peek
from sbqueue.engine.reads.replay import as_of, replay
from sbqueue.engine.receive import ops as receive_ops
from sbqueue.engine.send import ops as send_ops
from sbqueue.engine.send.frame import SendResult
from sbqueue.engine.send.small import Outgoing
from sbqueue.engine.sessions.ops import Sessions, SessionStateResult
from sbqueue.engine.settle import by_number
from sbqueue.engine.settle import ops as settle_ops
from sbqueue.engine.settle.apply import SettleResult
from sbqueue.engine.storage_guard import storage_guarded

__all__ = ["Entity", "SendResult", "SettleResult"]


@storage_guarded
class Entity(EntityHandle):
    """One queue or subscription (or one of their sub-queues), operated on with DataFrames."""

    # -- send (S2-S4) ----------------------------------------------------------------------
    def send_dataframe(self, df: DataFrame, round_robin_start: int = 0,
                       incoming_bytes: int = 0, send_id: str | None = None,
                       forwarded: bool = False, idempotent: bool = False,
                       in_send_order: bool = False) -> SendResult:
        """Append ``df`` (``body`` plus any message column of S2.1) in one commit
        (``send.ops.send_dataframe``)."""
        return send_ops.send_dataframe(self, df, round_robin_start, incoming_bytes, send_id,
                                       forwarded, idempotent, in_send_order)

    def send_messages(self, messages: Sequence[Outgoing], incoming_bytes: int,
                      as_dataframe: Callable[[], DataFrame], send_id: str | None = None
                      ) -> SendResult:
        """A client send, on the driver where it can be (``send.ops.send_messages``)."""
        return send_ops.send_messages(self, messages, incoming_bytes, as_dataframe, send_id)

    def send_forwarded(self, rows: Sequence[Mapping[str, Any]], send_id: str) -> bool:
        """A forwarding batch, at most once per ``send_id`` (``send.ops.send_forwarded``)."""
        return send_ops.send_forwarded(self, rows, send_id)

    def send_once(self, messages: Sequence[Outgoing], app_id: str, version: int) -> bool:
        """A streaming sink's batch, at most once (``send.ops.send_once``)."""
        return send_ops.send_once(self, messages, app_id, version)

    # -- receive (S5) ----------------------------------------------------------------------
    def receive_dataframe(self, max_messages: int = 100_000, mode: str = "peek_lock"
                          ) -> DataFrame:
        """Lock (or take) up to ``max_messages``, returned as a DataFrame with bodies
        (``receive.ops.receive_dataframe``)."""
        return receive_ops.receive_dataframe(self, max_messages, mode)

    def receive_rows(self, max_messages: int, mode: str = "peek_lock") -> list[Row]:
        """``receive_dataframe`` collected, grouped with this process's other small receives
        (the client's receive)."""
        return receive_ops.receive_rows(self, max_messages, mode)

    def receive_partitions(self, partitions: list[int], share: int, mode: str = "peek_lock",
                           total: int | None = None) -> DataFrame:
        """Receive from exactly these partitions, up to ``share`` from each; one commit."""
        return receive_ops.receive_partitions(self, partitions, share, mode, total)

    def receive_deferred(self, sequence_numbers: list[int], mode: str = "peek_lock"
                         ) -> DataFrame:
        """The deferred messages with these numbers, locked or taken, with bodies (S6.3)."""
        return by_number.receive_deferred(self, sequence_numbers, mode)

    def receive_deferred_rows(self, sequence_numbers: list[int], mode: str = "peek_lock"
                              ) -> list[Row]:
        """``receive_deferred`` as rows, by sequence number (the client's call)."""
        return by_number.receive_deferred_rows(self, sequence_numbers, mode)

    # -- sessions (S10) --------------------------------------------------------------------
    @property
    def sessions(self) -> Sessions:
        """Session locks, session receives and state; InvalidOperation unless the entity
        requires sessions (S10.2)."""
        return Sessions(self)

    def receive_sessions_dataframe(self, max_sessions: int = 8,
                                   max_messages_per_session: int = 100,
                                   mode: str = "peek_lock") -> DataFrame:
        """Lock up to ``max_sessions`` available sessions and return up to
        ``max_messages_per_session`` messages of each, with ``session_lock_token``: process
        them with ``groupBy("session_id")`` in sequence order, then settle, set state
        (``set_session_states``) and ``release_sessions``."""
        return self.sessions.receive_dataframe(max_sessions, max_messages_per_session, mode)

    def session_states(self) -> DataFrame:
        """session_id, partition_id, state (bytes or null), locked_until_utc (S10.5)."""
        return self.sessions.states()

    def set_session_states(self, df: DataFrame) -> SessionStateResult:
        """Set the state of the sessions of ``df`` (session_id, state, session_lock_token)."""
        return self.sessions.set_states(df)

    def release_sessions(self, df: DataFrame) -> None:
        """Release the session locks a ``receive_sessions_dataframe`` result holds."""
        sessions = self.sessions
        sessions.release_all(sessions.locks_of(df))

    # -- settle (S6) -----------------------------------------------------------------------
    def settle(self, locks: list[tuple[int, str]], kind: str, reason: str | None = None,
               description: str | None = None, *, held_until: datetime | None = None,
               deferred: bool = False) -> SettleResult:
        """Settle (sequence number, lock token) pairs in one commit over their partitions
        (``settle.ops.settle``)."""
        return settle_ops.settle(self, locks, kind, reason, description,
                                 held_until=held_until, deferred=deferred)

    def settle_dataframe(self, batch: DataFrame, kind: str, reason: str | None = None,
                         description: str | None = None) -> SettleResult:
        """Settle the rows of ``batch`` whose locks are valid; report the others."""
        return settle_ops.settle_dataframe(self, batch, kind, reason, description)

    def complete_dataframe(self, batch: DataFrame) -> SettleResult:
        return self.settle_dataframe(batch, "complete")

    def abandon_dataframe(self, batch: DataFrame) -> SettleResult:
        return self.settle_dataframe(batch, "abandon")

    def defer_dataframe(self, batch: DataFrame) -> SettleResult:
        return self.settle_dataframe(batch, "defer")

    def dead_letter_dataframe(self, batch: DataFrame, reason: str | None = None,
                              error_description: str | None = None) -> SettleResult:
        check_dead_letter_text(reason, error_description)
        return self.settle_dataframe(batch, "dead_letter", reason, error_description)

    def materialize_ranges(self, locks: list[tuple[int, str]]) -> None:
        """Turn the range locks ``locks`` touch into message rows (a transaction's read)."""
        settle_ops.materialize_ranges(self, locks)

    def cancel_scheduled(self, sequence_numbers: list[int]) -> None:
        """Remove scheduled messages not yet active; MessageNotFound for any other (S8.4)."""
        by_number.cancel_scheduled(self, sequence_numbers)

    def delete_messages(self, max_messages: int, before: datetime,
                        session_id: str | None = None) -> int:
        """Batch delete (S5.7) in one commit; how many were removed."""
        return by_number.delete_messages(self, max_messages, before, session_id)

    # -- reads: never commit ---------------------------------------------------------------
    def as_of(self, when: int | datetime) -> DataFrame:
        """The messages as the view showed them at ``when``: a version of the entity (one
        of its inbox's, a send commit) or a time. Delta time travel (``engine.reads.replay``)."""
        return as_of(self, when)

    def replay(self, when: int | datetime, destination: str, where: str | None = None
               ) -> SendResult:
        """Send what the entity held at ``when`` (matching ``where``) to ``destination``
        again, in one commit (``engine.reads.replay.replay``)."""
        return replay(self, when, destination, where)

    def peek_dataframe(self, max_messages: int = 1000, from_sequence: int | None = None,
                       after: tuple[datetime, int] | None = None,
                       session_id: str | None = None) -> DataFrame:
        """Messages in enqueued-time then sequence order; no lock, no change (S9)."""
        return peek.peek_dataframe(self, max_messages, from_sequence, after, session_id)

    def peek_rows(self, max_messages: int = 1000, from_sequence: int | None = None,
                  after: tuple[datetime, int] | None = None,
                  session_id: str | None = None) -> list[Row]:
        """``peek_dataframe`` collected (the client's peek), on the driver where it can be."""
        return peek.peek_rows(self, max_messages, from_sequence, after, session_id)
