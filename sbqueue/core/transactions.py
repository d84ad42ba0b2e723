"""Transaction rules as pure functions (SPEC S12): one entity, one partition, one key,
at most 100 messages, 2 minutes.

``TransactionScope`` is fed each operation as the caller adds it, and refuses the first
one that breaks a rule, before anything is written; the engine then commits the whole
transaction at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sbqueue.core.routing import partition_for, routing_key
from sbqueue.core.sequence import partition_of
from sbqueue.exceptions import InvalidOperationError, OperationTimeoutError

__all__ = ["MAX_MESSAGES", "TIMEOUT", "TransactionScope"]

MAX_MESSAGES = 100  # S12.4
TIMEOUT = timedelta(minutes=2)  # S12.4, from the first operation


@dataclass
class TransactionScope:
    """What a transaction has touched: its entity, partition, key, session and size."""

    entity: str | None = None
    partitions: int = 1
    duplicate_detection: bool = False
    partition: int | None = None
    key: str | None = None
    session: str | None = None
    messages: int = 0
    started: datetime | None = None

    def enter(self, entity: str, partitions: int, duplicate_detection: bool, count: int,
              now: datetime) -> None:
        """An operation on ``entity`` touching ``count`` messages (S12.1, S12.4)."""
        if self.entity is None:
            self.entity, self.partitions = entity, partitions
            self.duplicate_detection, self.started = duplicate_detection, now
        elif entity != self.entity:
            raise InvalidOperationError(
                f"a transaction works on one entity: it began on {self.entity!r}, not "
                f"{entity!r} (S12.1)")
        self.check_time(now)
        if self.messages + count > MAX_MESSAGES:
            raise InvalidOperationError(
                f"a transaction holds at most {MAX_MESSAGES} messages; this one would hold "
                f"{self.messages + count} (S12.4)")
        self.messages += count

    def check_time(self, now: datetime) -> None:
        if self.started is not None and now - self.started > TIMEOUT:
            raise OperationTimeoutError(
                f"the transaction began at {self.started}, more than {TIMEOUT} ago; it timed "
                "out and nothing of it was committed (S12.4)")

    def _pin(self, partition: int, what: str) -> None:
        if self.partition is None:
            self.partition = partition
        elif partition != self.partition:
            raise InvalidOperationError(
                f"{what} is in partition {partition}, the transaction's is {self.partition}: "
                "a transaction commits on one partition (S12.3, S12.5)")

    def add_send(self, session_id: str | None, partition_key: str | None,
                 message_id: str | None) -> None:
        """A message sent in the transaction: its key decides the partition (S12.3)."""
        if session_id is not None:
            if self.session is not None and session_id != self.session:
                raise InvalidOperationError(
                    f"session {session_id!r} after session {self.session!r}: messages of "
                    "different sessions cannot share a transaction (S12.3)")
            self.session = session_id
        key = routing_key(session_id, partition_key, message_id, self.duplicate_detection)
        if self.partitions == 1:
            self._pin(0, "the message")
            return
        if key is None:
            raise InvalidOperationError(
                "a message sent in a transaction on a partitioned entity needs a partition "
                "key (session_id, partition_key, or message_id with duplicate detection) "
                "(S12.3)")
        if self.key is not None and key != self.key:
            raise InvalidOperationError(
                f"key {key!r} after key {self.key!r}: the messages of a transaction share "
                "one partition key (S12.3)")
        self.key = key
        self._pin(partition_for(key, self.partitions), f"key {key!r}")

    def add_settlement(self, sequence_number: int) -> None:
        """A message settled in the transaction: it must be in its partition (S12.5)."""
        self._pin(partition_of(sequence_number), f"message {sequence_number}")

    def add_session(self, session_id: str, partition: int) -> None:
        """A session state set in the transaction: one session, its partition (S12.3)."""
        if self.session is not None and session_id != self.session:
            raise InvalidOperationError(
                f"session {session_id!r} after session {self.session!r}: one session a "
                "transaction (S12.3)")
        self.session = session_id
        self._pin(partition, f"session {session_id!r}")
