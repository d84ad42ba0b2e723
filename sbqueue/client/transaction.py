"""``ServiceBusTransaction``: sends, settlements and session state committed at once (S12).

Like .NET's TransactionScope (docs/api/client.md): ``with client.transaction() as tx:`` collects the
operations, each checked as it is added (one entity, one partition, one key, at most 100
messages: ``core.transactions``); leaving the block commits them in one Delta commit
(``engine.transactions.commit``), an exception or ``rollback()`` drops them with nothing written.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType

from sbqueue.client.convert import to_dataframe, to_outgoing
from sbqueue.client.message import ServiceBusMessage, ServiceBusReceivedMessage
from sbqueue.client.receiver import ServiceBusReceiver
from sbqueue.client.sender import SendInput, ServiceBusSender, as_list, scheduled
from sbqueue.client.session import ServiceBusSession
from sbqueue.core.clock import utcnow
from sbqueue.core.duplicates import dedupe_window
from sbqueue.core.sessions import state_bytes
from sbqueue.core.sizes import check_dead_letter_text, message_limit
from sbqueue.core.transactions import TransactionScope
from sbqueue.core.transitions import Lane
from sbqueue.engine.entity import Entity
from sbqueue.engine.handle import EntityHandle
from sbqueue.engine.sessions.ops import SessionLock
from sbqueue.engine.transactions.commit import Settlement, TransactionPlan, commit_transaction
from sbqueue.exceptions import InvalidOperationError

__all__ = ["ServiceBusTransaction"]


def _now() -> datetime:
    return utcnow()


class ServiceBusTransaction:
    """One transaction on one entity; use it as a context manager."""

    def __init__(self) -> None:
        self._scope = TransactionScope()
        self._entity: EntityHandle | None = None
        self._messages: list[ServiceBusMessage] = []
        self._settled: list[tuple[Settlement, ServiceBusReceivedMessage]] = []
        self._state: tuple[SessionLock, bytes | None] | None = None
        self._scheduled: list[int] = []
        self.done = False
        self.dropped: list[str] = []  # message ids not sent: duplicates (S11)

    def _enter(self, entity: EntityHandle, count: int) -> None:
        if self.done:
            raise InvalidOperationError("this transaction was committed or rolled back")
        self._scope.enter(entity.name, entity.partitions,
                          dedupe_window(entity.props) is not None, count, _now())
        self._entity = self._entity or entity

    # -- sends -----------------------------------------------------------------------------
    def send_messages(self, sender: ServiceBusSender, message: SendInput) -> None:
        """Send at commit (S12.1); invisible to receivers and peek until then."""
        items = as_list(message)
        entity = sender.entity
        if not isinstance(entity, Entity):
            raise InvalidOperationError(
                f"transaction send to topic {entity.name}: a transaction sends to one queue "
                "(S12.1; topic sends in transactions: decision 009)")
        self._enter(entity, len(items))
        for m in items:
            m.validate()
            self._scope.add_send(m.session_id, m.partition_key, m.message_id)
        self._messages += items

    def schedule_messages(self, sender: ServiceBusSender,
                          messages: ServiceBusMessage | Sequence[ServiceBusMessage],
                          schedule_time_utc: datetime) -> list[int]:
        """Schedule at commit; the returned list gets the sequence numbers when it commits
        (S3.4, S12.1)."""
        self.send_messages(sender, scheduled(messages, schedule_time_utc))
        return self._scheduled

    # -- settlements -----------------------------------------------------------------------
    def _settle(self, receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage,
                kind: str, reason: str | None = None, description: str | None = None) -> None:
        token = receiver.check_settleable(message, kind)
        if kind == "renew" and receiver.holds_session:
            raise TypeError("session messages cannot be renewed one by one: renew the "
                            "session lock (S10.3)")
        entity = receiver.entity
        self._enter(entity, 1)
        if any(s.sequence_number == message.sequence_number for s, _ in self._settled):
            raise InvalidOperationError(
                f"message {message.sequence_number} is settled twice in one transaction")
        self._scope.add_settlement(message.sequence_number)
        lanes = (Lane.MAIN, Lane.DEFERRED) if entity.lane == Lane.MAIN else (entity.lane,)
        self._settled.append((Settlement(message.sequence_number, token, kind, lanes, reason,
                                         description, receiver.holds_session), message))

    def complete_message(self, receiver: ServiceBusReceiver,
                         message: ServiceBusReceivedMessage) -> None:
        self._settle(receiver, message, "complete")

    def abandon_message(self, receiver: ServiceBusReceiver,
                        message: ServiceBusReceivedMessage) -> None:
        self._settle(receiver, message, "abandon")

    def defer_message(self, receiver: ServiceBusReceiver,
                      message: ServiceBusReceivedMessage) -> None:
        self._settle(receiver, message, "defer")

    def dead_letter_message(self, receiver: ServiceBusReceiver,
                            message: ServiceBusReceivedMessage, reason: str | None = None,
                            error_description: str | None = None) -> None:
        check_dead_letter_text(reason, error_description)
        self._settle(receiver, message, "dead_letter", reason, error_description)

    def renew_message_lock(self, receiver: ServiceBusReceiver,
                           message: ServiceBusReceivedMessage) -> None:
        self._settle(receiver, message, "renew")

    def set_session_state(self, session: ServiceBusSession, state: bytes | str | None) -> None:
        """Set the session's state at commit (S10.5, S12.1)."""
        entity = session.sessions.entity
        data = state_bytes(state, message_limit(entity.max_message_kilobytes))
        session.check_held()
        self._enter(entity, 0)
        self._scope.add_session(session.session_id, session.lock.partition)
        self._state = (session.lock, data)

    # -- end -------------------------------------------------------------------------------
    def commit(self) -> None:
        """Everything at one point (S12.2); on an error nothing of it is committed."""
        if self.done:
            raise InvalidOperationError("this transaction was committed or rolled back")
        self.done = True
        if self._entity is None or self._scope.partition is None:
            return
        entity = self._entity
        if entity.sub_queue.is_dead_letter:  # settlements in a dead-letter queue: the same tables
            entity = entity.namespace.entity(entity.name)
        plan = TransactionPlan(partition=self._scope.partition,
                               started=self._scope.started or _now(),
                               settlements=[s for s, _ in self._settled], state=self._state)
        if self._messages:
            messages, spark = list(self._messages), entity.spark
            plan.outgoing = to_outgoing(messages)  # validated and given ids here, once
            plan.frame = lambda: to_dataframe(spark, messages)  # only if Spark must send
            plan.send_bytes = sum(m.size_in_bytes for m in self._messages)
            plan.message_ids = [str(m.message_id) for m in self._messages]
        result = commit_transaction(entity, plan)
        self.dropped = result.dropped
        for settlement, message in self._settled:
            if settlement.kind == "renew":
                message.locked_until_utc = result.renewed_until
            else:
                message.settled = True
        sent = [m for m in self._messages if m.message_id not in result.dropped]
        if result.send_id and any(m.scheduled_enqueue_time_utc for m in sent):
            numbers = entity.sequence_numbers(result.send_id)  # in send order
            self._scheduled[:] = [n for n, m in zip(numbers, sent, strict=True)
                                  if m.scheduled_enqueue_time_utc is not None]

    def rollback(self) -> None:
        """Drop everything; nothing was written."""
        self.done = True

    def __enter__(self) -> ServiceBusTransaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None:
            self.rollback()
        elif not self.done:
            self.commit()

    def __repr__(self) -> str:
        return (f"ServiceBusTransaction(messages={self._scope.messages}, "
                f"partition={self._scope.partition}, done={self.done})")

