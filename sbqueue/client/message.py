"""Messages as the client sees them: to send, as received, and batches (SPEC S2).

Shaped like azure-servicebus 7.14: ``ServiceBusMessage`` is built by the caller,
``ServiceBusReceivedMessage`` adds the broker properties of S2.5, and
``ServiceBusMessageBatch`` refuses a message that would take it past its size (S2.4).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from sbqueue.client.enums import ServiceBusMessageState
from sbqueue.core.sizes import STANDARD_MESSAGE_BYTES, STRING_PROPERTIES, is_utf8, message_size
from sbqueue.exceptions import InvalidOperationError, MessageSizeExceededError

__all__ = [
    "PropertyText",
    "ReceivedProperties",
    "ServiceBusMessage",
    "ServiceBusMessageBatch",
    "ServiceBusReceivedMessage",
    "check_property_value",
]

_PROPERTY_TYPES = (str, bool, int, float, datetime, timedelta, uuid.UUID)
_INT64 = (-(2**63), 2**63 - 1)
_GIVEN_ID_LENGTH = 32  # the uuid4 hex a message without message_id is sent with (S2.6)


def check_property_value(name: str, value: object) -> None:
    """S2.3: str, bool, int (64-bit), float, datetime, timedelta, uuid or None."""
    if value is None:
        return
    if isinstance(value, str) and not is_utf8(value):
        raise InvalidOperationError(
            f"application property {name!r} is {value!r}, which UTF-8 cannot store (S2.3)")
    if not isinstance(value, _PROPERTY_TYPES):
        raise InvalidOperationError(
            f"application property {name!r} has a {type(value).__name__} value; allowed: str, "
            "bool, int, float, datetime, timedelta, uuid, None (S2.3)")
    if isinstance(value, datetime) and not in_utc_range(value):
        raise InvalidOperationError(
            f"application property {name!r} is {value.isoformat()}, before the year 1 or after "
            "9999 in UTC, where it is stored (S2.3)")
    if isinstance(value, int) and not isinstance(value, bool) and not (
            _INT64[0] <= value <= _INT64[1]):
        raise InvalidOperationError(
            f"application property {name!r} is {value}, outside 64-bit integers (S2.3)")


def in_utc_range(value: datetime) -> bool:
    """Whether ``value`` has a UTC time (it is stored in UTC): 0001-01-01 at +05:00 has
    none, and would fail as a raw OverflowError when sized or sent."""
    if value.tzinfo is None:
        return True  # taken as UTC already
    try:
        value.astimezone(timezone.utc)
    except OverflowError:
        return False
    return True


def _check_properties_map(values: object) -> None:
    """S2.3: application properties are a map (or None); ``dict()`` of a list or a str would
    fail as a raw TypeError or ValueError."""
    if values is not None and not isinstance(values, Mapping):
        raise InvalidOperationError(
            f"application_properties {values!r:.60} is a {type(values).__name__}; it must be a "
            "map from name to value (S2.3)")


def _body_bytes(body: object) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        if not is_utf8(body):
            raise InvalidOperationError(
                f"message body {body[:40]!r} holds a lone surrogate; UTF-8 cannot store it "
                "(S2.1)")
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    raise InvalidOperationError(
        f"message body is a {type(body).__name__}; it must be str or bytes (S2.1)")


class ServiceBusMessage:
    """A message to send (S2.1). Properties may be set after construction, as in the SDK."""

    def __init__(
        self,
        body: str | bytes | None,
        *,
        application_properties: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        message_id: str | None = None,
        scheduled_enqueue_time_utc: datetime | None = None,
        time_to_live: timedelta | None = None,
        content_type: str | None = None,
        correlation_id: str | None = None,
        subject: str | None = None,
        partition_key: str | None = None,
        to: str | None = None,
        reply_to: str | None = None,
        reply_to_session_id: str | None = None,
    ) -> None:
        self.body_bytes = _body_bytes(body)
        _check_properties_map(application_properties)
        self.application_properties: dict[str, Any] | None = (
            dict(application_properties) if application_properties is not None else None)
        self.session_id = session_id
        self.message_id = message_id
        self.scheduled_enqueue_time_utc = scheduled_enqueue_time_utc
        self.time_to_live = time_to_live
        self.content_type = content_type
        self.correlation_id = correlation_id
        self.subject = subject
        self.partition_key = partition_key
        self.to = to
        self.reply_to = reply_to
        self.reply_to_session_id = reply_to_session_id

    @property
    def body(self) -> Any:
        return self.body_bytes

    def __str__(self) -> str:
        return self.body_bytes.decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(message_id={self.message_id!r}, body={str(self)[:40]!r})"

    def validate(self) -> None:
        """The checks a send makes before any Spark job runs (S2.1, S2.3; the engine's
        checks of S2.2 and S2.4 follow)."""
        _check_properties_map(self.application_properties)
        for name, value in (self.application_properties or {}).items():
            if not isinstance(name, str) or not is_utf8(name):
                raise InvalidOperationError(
                    f"application property name {name!r} is not a str UTF-8 can store (S2.3)")
            check_property_value(name, value)
        for name in STRING_PROPERTIES:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidOperationError(
                    f"{name} is a {type(value).__name__}: {value!r}; it must be a str (S2.1)")
            if value is not None and not is_utf8(value):
                raise InvalidOperationError(
                    f"{name} {value[:40]!r} holds a lone surrogate; UTF-8 cannot store it "
                    "(S2.1)")
        if self.time_to_live is not None and not isinstance(self.time_to_live, timedelta):
            raise InvalidOperationError(
                f"time_to_live {self.time_to_live!r} is not a timedelta (S2.1)")
        scheduled = self.scheduled_enqueue_time_utc
        if scheduled is not None and not (isinstance(scheduled, datetime)
                                          and in_utc_range(scheduled)):
            raise InvalidOperationError(
                f"scheduled_enqueue_time_utc {scheduled!r} is not a datetime with a UTC time "
                "(S2.1)")

    @property
    def size_in_bytes(self) -> int:
        """Body plus all properties (S2.4), as the engine counts them: a message without a
        ``message_id`` is sent with a 32-character one (S2.6), so that is counted too."""
        strings = [getattr(self, name) for name in STRING_PROPERTIES]
        if self.message_id is None:
            strings.append("0" * _GIVEN_ID_LENGTH)
        return message_size(self.body_bytes, strings, self.application_properties)


class PropertyText(str):
    """A received string property. A str, with the ``decode()`` that SDK programs call on
    the bytes the AMQP transport hands them (``props.get(b"Color").decode()``)."""

    __slots__ = ()

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return str(self)


class ReceivedProperties(dict[str, Any]):
    """A received message's application properties: str keys, looked up by str or by
    UTF-8 bytes (the SDK's received keys are bytes); values as they were sent."""

    @staticmethod
    def _key(key: object) -> str:
        if isinstance(key, (bytes, bytearray)):
            return bytes(key).decode("utf-8")
        return key  # type: ignore[return-value]  # a str, or a miss like any dict's

    def __getitem__(self, key: object) -> Any:
        return super().__getitem__(self._key(key))

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self._key(key))

    def get(self, key: object, default: Any = None) -> Any:
        return super().get(self._key(key), default)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> ReceivedProperties:
        return cls({k: PropertyText(v) if type(v) is str else v for k, v in values.items()})


class ServiceBusReceivedMessage(ServiceBusMessage):
    """A received message: the sent properties plus the broker's (S2.5).

    ``body`` is an iterator of bytes, as in the SDK; ``body_bytes`` the plain bytes and
    ``str(msg)`` the text.
    """

    def __init__(self, body: bytes, *, broker: Mapping[str, Any], **properties: Any) -> None:
        super().__init__(body, **properties)
        if self.application_properties is not None:
            self.application_properties = ReceivedProperties.of(self.application_properties)
        self.sequence_number: int = broker["sequence_number"]
        self.enqueued_sequence_number: int = broker.get("enqueued_sequence_number") or 0
        self.enqueued_time_utc: datetime | None = broker.get("enqueued_time_utc")
        self.expires_at_utc: datetime | None = broker.get("expires_at_utc")
        self.delivery_count: int = broker.get("delivery_count") or 0
        self.locked_until_utc: datetime | None = broker.get("locked_until_utc")
        self.lock_token: str | None = broker.get("lock_token")
        self.state: ServiceBusMessageState = broker.get("state", ServiceBusMessageState.ACTIVE)
        self.dead_letter_reason: str | None = broker.get("dead_letter_reason")
        self.dead_letter_error_description: str | None = broker.get(
            "dead_letter_error_description")
        self.dead_letter_source: str | None = broker.get("dead_letter_source")
        self.partition_id: int = broker.get("partition_id", 0)
        self.settled = False
        self.auto_renew_error: Exception | None = None  # set by an AutoLockRenewer

    @property
    def body(self) -> Iterator[bytes]:
        return iter((self.body_bytes,))

    @property
    def label(self) -> str | None:
        """The SDK's older name of ``subject``."""
        return self.subject

    def __repr__(self) -> str:
        return (f"ServiceBusReceivedMessage(sequence_number={self.sequence_number}, "
                f"message_id={self.message_id!r}, delivery_count={self.delivery_count})")


class ServiceBusMessageBatch:
    """Messages sent together, at most ``max_size_in_bytes`` in all (S2.4)."""

    def __init__(self, max_size_in_bytes: int | None = None) -> None:
        self.max_size_in_bytes = max_size_in_bytes or STANDARD_MESSAGE_BYTES
        self.messages: list[ServiceBusMessage] = []
        self._size = 0

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self.messages)

    def add_message(self, message: ServiceBusMessage) -> None:
        """Add ``message``; MessageSizeExceededError if the batch would grow too large."""
        if not isinstance(message, ServiceBusMessage):
            raise InvalidOperationError(
                f"a batch holds ServiceBusMessage objects, not {type(message).__name__} "
                f"{message!r:.60} (S2.4)")
        message.validate()
        size = message.size_in_bytes
        if self._size + size > self.max_size_in_bytes:
            raise MessageSizeExceededError(
                f"message {message.message_id!r} of {size} bytes does not fit: the batch holds "
                f"{self._size} of {self.max_size_in_bytes} bytes (S2.4)")
        self.messages.append(message)
        self._size += size
