"""The client's enums, with the values of azure-servicebus 7.14 (plain strings accepted)."""

from __future__ import annotations

from enum import Enum

from sbqueue.exceptions import InvalidOperationError

__all__ = [
    "NEXT_AVAILABLE_SESSION",
    "ServiceBusMessageState",
    "ServiceBusReceiveMode",
    "ServiceBusSubQueue",
    "as_receive_mode",
    "as_sub_queue",
]


class ServiceBusReceiveMode(str, Enum):
    PEEK_LOCK = "peeklock"
    RECEIVE_AND_DELETE = "receiveanddelete"


class ServiceBusSubQueue(str, Enum):
    DEAD_LETTER = "deadletter"
    TRANSFER_DEAD_LETTER = "transferdeadletter"


class ServiceBusMessageState(int, Enum):
    ACTIVE = 0
    DEFERRED = 1
    SCHEDULED = 2


class _NextAvailableSession:
    """Marker for a session receiver that takes any unlocked session (S10.2)."""

    def __repr__(self) -> str:
        return "NEXT_AVAILABLE_SESSION"


NEXT_AVAILABLE_SESSION = _NextAvailableSession()


def _normalized(value: object) -> str:
    return str(value.value if isinstance(value, Enum) else value).replace("_", "").lower()


def as_receive_mode(value: object) -> ServiceBusReceiveMode:
    """An enum member or its name or value in any case ('peek_lock', 'PeekLock')."""
    for mode in ServiceBusReceiveMode:
        if _normalized(value) in (mode.value, mode.name.replace("_", "").lower()):
            return mode
    raise InvalidOperationError(
        f"receive_mode {value!r} is not PEEK_LOCK or RECEIVE_AND_DELETE (S5.1)")


def as_sub_queue(value: object) -> ServiceBusSubQueue | None:
    """None, an enum member, or its name or value in any case."""
    if value is None:
        return None
    for queue in ServiceBusSubQueue:
        if _normalized(value) in (queue.value, queue.name.replace("_", "").lower()):
            return queue
    raise InvalidOperationError(
        f"sub_queue {value!r} is not DEAD_LETTER or TRANSFER_DEAD_LETTER (S7.1)")
