"""``spark.readStream.format("sbqueue")``: messages in micro-batches, peek-locked, completed
once the batch that carried them is done (at least once, never lost).

A batch's end offset names the locks it holds (sequence number and lock token each). Spark
asks for the next offset (``latestOffset``) only after the batch ending at the current one
has run and its sink committed, so that call first completes that batch's messages, then
receives the next ones; ``commit`` (called by Spark when it plans a later batch) completes
them too and is then a no-op. A batch that fails, or a query that dies, completes nothing:
the locks end and the messages are delivered again with their delivery count raised, so
a message that keeps failing reaches the dead-letter queue (S6.7). Receives and completes
run on the engine's driver paths (``Namespace.without_spark``; decision 024).

On a session entity, each batch locks up to ``maxSessionsPerBatch`` sessions (8 by
default) and takes their messages in sequence order (S10.4); completing the batch
completes them and releases the sessions, so a session's later messages follow in a later
batch, still in order.

A batch that Spark replays after a restart (it logged the batch, not its end) is emitted
empty and its locks are left to end: whether its sink wrote it is unknown here, so its
messages are received again later with their delivery count raised, never completed
unseen. A poison message thus fails its batch only until it is dead-lettered.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from sbqueue.core.clock import utcnow
from sbqueue.core.subqueues import SubQueue
from sbqueue.datasource.options import Options
from sbqueue.datasource.scan import open_entity
from sbqueue.engine.entity import Entity
from sbqueue.engine.reads.view_here import VIEW_SCHEMA
from sbqueue.engine.sessions.ops import SessionLock
from sbqueue.exceptions import InvalidOperationError, SparkSetupError

__all__ = ["StreamSource"]

_NAMES = VIEW_SCHEMA.fieldNames()  # a read's columns: received rows add their sub-queue
_ASK = 100  # messages one receive asks for: a receive decided on the driver
_ALL = 10_000  # a batch's size when Spark asks for everything available
_COUNTED = {SubQueue.MAIN: "active", SubQueue.DEAD_LETTER: "dead_letter",
            SubQueue.TRANSFER_DEAD_LETTER: "transfer_dead_letter"}  # ``Entity.counts`` keys


class _Batch(InputPartition):
    """A batch's received messages, handed to the task that emits them."""


def _count(options: Mapping[str, str], name: str, default: str) -> int:
    """A whole-number option of at least 1, or one clear error naming it."""
    value = options.get(name, default)
    if not str(value).isdigit() or int(value) < 1:
        raise InvalidOperationError(
            f"{name} {value!r}: a whole number of at least 1 (decision 024)")
    return int(value)


def _locks(offset: Mapping[str, Any]) -> list[tuple[int, str]]:
    return [(int(seq), str(token)) for seq, token in offset.get("locks", [])]


class StreamSource(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream of one queue, subscription or sub-queue."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = Options.parse(options)
        self.batch_size = _count(options, "maxMessagesPerBatch", "1000")
        self.sessions_per_batch = _count(options, "maxSessionsPerBatch", "8")
        # batch id -> its messages, from the receive until they are completed
        self.held: dict[int, list[dict[str, Any]]] = {}
        self.budget: int | None = None  # Trigger.AvailableNow: what was there at its start
        self.available_now = False

    def initialOffset(self) -> dict[str, Any]:
        return {"batch": 0, "locks": []}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.batch_size)

    def prepareForTriggerAvailableNow(self) -> None:
        """The messages there now bound the query; where they cannot be counted without
        Spark, it ends at the first receive that finds none."""
        self.available_now = True
        entity = open_entity(self.options)
        try:
            self.budget = int(entity.counts()[_COUNTED[entity.sub_queue]])
        except SparkSetupError:
            self.budget = None

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if isinstance(limit, ReadAllAvailable) and not self.available_now:
            raise InvalidOperationError(
                f"{self.options.where()}: Trigger.Once runs one batch and never asks for "
                "another, so its messages would never be completed; use "
                "trigger(availableNow=True) (decision 024)")
        entity = open_entity(self.options)
        self._complete(entity, start)  # Spark asks only once the batch up to start is done
        wanted = _ALL if isinstance(limit, ReadAllAvailable) else (
            limit.max_rows if isinstance(limit, ReadMaxRows) else self.batch_size)
        if self.budget is not None:
            wanted = min(wanted, self.budget)
        messages, sessions = (self._receive_sessions(entity, wanted)
                              if entity.props.requires_session
                              and entity.sub_queue is SubQueue.MAIN else
                              (self._receive(entity, wanted), []))
        if not messages:
            return start
        if self.budget is not None:
            self.budget -= len(messages)
        batch = int(start["batch"]) + 1
        self.held[batch] = messages
        return {"batch": batch,
                "locks": [[m["sequence_number"], m["lock_token"]] for m in messages],
                "sessions": [[lk.session_id, lk.partition, lk.token] for lk in sessions]}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        # A batch replayed after a restart is not held here: emitted empty (see above).
        messages = self.held.get(int(end["batch"]), [])
        return [_Batch([tuple(m.get(n) for n in _NAMES) for m in messages])]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield from partition.value

    def commit(self, end: dict[str, Any]) -> None:
        self._complete(open_entity(self.options), end)

    def _complete(self, entity: Entity, end: Mapping[str, Any]) -> None:
        """Complete the messages of the batch ending at ``end`` if this worker received
        them, once (a lock already ended is reported by the engine and left to redelivery)."""
        if self.held.pop(int(end.get("batch", 0)), None):
            entity.settle(_locks(end), "complete")
            for session_id, partition, token in end.get("sessions", []):
                entity.sessions.release(
                    SessionLock(str(session_id), int(partition), str(token), utcnow()))

    @staticmethod
    def _receive(entity: Entity, wanted: int) -> list[dict[str, Any]]:
        """Up to ``wanted`` messages, peek-locked, in receives the driver decides."""
        out: list[dict[str, Any]] = []
        while len(out) < wanted:
            rows = entity.receive_rows(min(_ASK, wanted - len(out)))
            if not rows:
                break
            out += [{**r.asDict(), "sub_queue": entity.sub_queue.view_name} for r in rows]
        return out

    def _receive_sessions(self, entity: Entity, wanted: int
                          ) -> tuple[list[dict[str, Any]], list[SessionLock]]:
        """Up to ``wanted`` messages of up to ``sessions_per_batch`` sessions, locked with
        them, each session's in sequence order; sessions that gave none released."""
        locks = entity.sessions.lock_many(min(self.sessions_per_batch, wanted))
        if not locks:
            return [], []
        share = max(1, wanted // len(locks))
        rows = [{**r.asDict(), "sub_queue": entity.sub_queue.view_name}
                for r in entity.sessions.receive_rows(locks, share, "peek_lock")]
        used = {r["session_id"] for r in rows}
        for lock in locks:
            if lock.session_id not in used:
                entity.sessions.release(lock)
        return rows, [lk for lk in locks if lk.session_id in used]
