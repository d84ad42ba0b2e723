"""``ServiceBusSender``: messages, lists and batches sent as one DataFrame append (S2-S4, S8.4).

Every send goes through ``Entity.send_dataframe``, so a message sent here is the same
message a DataFrame send stores: same validation, key precedence and routing (S4.2).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from sbqueue.client.convert import to_dataframe, to_outgoing, utc
from sbqueue.client.message import ServiceBusMessage, ServiceBusMessageBatch, in_utc_range
from sbqueue.client.observe import timed
from sbqueue.core.keywords import OPERATION, accept, honours_timeout
from sbqueue.core.sizes import batch_limit
from sbqueue.engine.entity import Entity
from sbqueue.engine.topics.topic import Topic
from sbqueue.exceptions import InvalidOperationError, MessageSizeExceededError

__all__ = ["SendInput", "ServiceBusSender", "as_list", "scheduled"]

SendInput = ServiceBusMessage | ServiceBusMessageBatch | Sequence[ServiceBusMessage]


def as_list(message: SendInput) -> list[ServiceBusMessage]:
    if isinstance(message, ServiceBusMessageBatch):
        return list(message.messages)
    if isinstance(message, ServiceBusMessage):
        return [message]
    if isinstance(message, (str, bytes)) or not isinstance(message, Iterable):
        raise InvalidOperationError(
            f"send_messages takes a ServiceBusMessage, a list of them or a batch, not "
            f"{type(message).__name__}")
    messages = list(message)
    for m in messages:
        if not isinstance(m, ServiceBusMessage):
            raise InvalidOperationError(
                f"send_messages got a {type(m).__name__} in its list; wrap it in "
                "ServiceBusMessage")
    return messages


def scheduled(messages: ServiceBusMessage | Sequence[ServiceBusMessage],
              schedule_time_utc: datetime) -> list[ServiceBusMessage]:
    """The messages, each set to activate at ``schedule_time_utc`` (S8.4)."""
    if not isinstance(schedule_time_utc, datetime) or not in_utc_range(schedule_time_utc):
        raise InvalidOperationError(
            f"schedule_time_utc {schedule_time_utc!r} is not a datetime with a UTC time (S8.4)")
    items = as_list(messages)
    for m in items:
        m.scheduled_enqueue_time_utc = utc(schedule_time_utc)
    return items


class ServiceBusSender:
    """Sends to one queue or topic. Thread-safe: it holds no per-send state."""

    def __init__(self, entity: Entity | Topic) -> None:
        self._entity = entity
        self.entity_name = entity.name

    @property
    def _batch_bytes(self) -> int:
        return batch_limit(self._entity.max_message_kilobytes)

    @property
    def entity(self) -> Entity | Topic:
        return self._entity

    def create_message_batch(self, max_size_in_bytes: int | None = None
                             ) -> ServiceBusMessageBatch:
        """An empty batch; at most the entity's batch size (S2.4), which None or 0 means (as
        in the SDK). A size past it raises MessageSizeExceededError, a negative or non-int
        one InvalidOperationError (both ValueErrors, as the SDK raises)."""
        limit = self._batch_bytes
        if max_size_in_bytes is None:
            return ServiceBusMessageBatch(limit)
        if isinstance(max_size_in_bytes, bool) or not isinstance(max_size_in_bytes, int) \
                or max_size_in_bytes < 0:
            raise InvalidOperationError(
                f"max_size_in_bytes {max_size_in_bytes!r} is not a number of bytes (S2.4)")
        if max_size_in_bytes > limit:
            raise MessageSizeExceededError(
                f"max_size_in_bytes {max_size_in_bytes} is more than the entity's batch limit "
                f"of {limit} bytes (S2.4)")
        return ServiceBusMessageBatch(max_size_in_bytes or limit)

    def _send(self, messages: list[ServiceBusMessage]) -> str:
        if not messages:
            return ""
        total = sum(m.size_in_bytes for m in messages)
        if len(messages) > 1 and total > self._batch_bytes:
            raise MessageSizeExceededError(
                f"{len(messages)} messages of {total} bytes in all exceed the batch limit of "
                f"{self._batch_bytes} bytes; send them in several batches (S2.4)")
        entity = self._entity  # a queue or a topic: on the driver where it can be
        return entity.send_messages(to_outgoing(messages), total,
                                    lambda: to_dataframe(entity.spark, messages)).send_id

    @timed("send")
    @honours_timeout
    def send_messages(self, message: SendInput, **kwargs: Any) -> None:
        """Store the message(s) in one commit: all of them, or none on an error (S17)."""
        accept("send_messages", kwargs, OPERATION)
        self._send(as_list(message))

    @timed("schedule")
    @honours_timeout
    def schedule_messages(self, messages: ServiceBusMessage | Sequence[ServiceBusMessage],
                          schedule_time_utc: datetime, **kwargs: Any) -> list[int]:
        """Send for activation at ``schedule_time_utc``; their sequence numbers (S3.4, S8.4).
        On a topic they wait at the topic (S8.5). A time in the past activates at once
        [decided]."""
        accept("schedule_messages", kwargs, OPERATION)
        send_id = self._send(scheduled(messages, schedule_time_utc))
        return self._entity.sequence_numbers(send_id) if send_id else []

    @timed("cancel")
    @honours_timeout
    def cancel_scheduled_messages(self, sequence_numbers: int | Sequence[int], **kwargs: Any
                                  ) -> None:
        """Remove scheduled messages not yet active; MessageNotFound otherwise (S8.4)."""
        accept("cancel_scheduled_messages", kwargs, OPERATION)
        seqs = [sequence_numbers] if isinstance(sequence_numbers, int) else list(
            sequence_numbers)
        self._entity.cancel_scheduled(seqs)

    def close(self) -> None:
        """Nothing to release: sends hold no connection."""

    def __enter__(self) -> ServiceBusSender:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
