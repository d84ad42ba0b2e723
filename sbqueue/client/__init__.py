"""Layer 5: the client shaped like azure-servicebus 7.14 (docs/api/client.md)."""

from __future__ import annotations

from sbqueue.client.client import ServiceBusClient
from sbqueue.client.enums import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusMessageState,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from sbqueue.client.lock_renewer import AutoLockRenewer
from sbqueue.client.message import (
    ServiceBusMessage,
    ServiceBusMessageBatch,
    ServiceBusReceivedMessage,
)
from sbqueue.client.receiver import ServiceBusReceiver
from sbqueue.client.sender import ServiceBusSender
from sbqueue.client.session import ServiceBusSession
from sbqueue.client.transaction import ServiceBusTransaction

__all__ = [
    "NEXT_AVAILABLE_SESSION",
    "AutoLockRenewer",
    "ServiceBusClient",
    "ServiceBusMessage",
    "ServiceBusMessageBatch",
    "ServiceBusMessageState",
    "ServiceBusReceiveMode",
    "ServiceBusReceivedMessage",
    "ServiceBusReceiver",
    "ServiceBusSender",
    "ServiceBusSession",
    "ServiceBusSubQueue",
    "ServiceBusTransaction",
]
