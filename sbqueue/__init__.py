"""sbqueue: Azure Service Bus partitioned queues and topics on Spark and Delta Lake.

Two faces over one engine: the client shaped like azure-servicebus (``ServiceBusClient``)
and the Spark-native DataFrame API (``Namespace``): queues, topics with subscriptions and
rules, sessions and transactions.
"""

from __future__ import annotations

from sbqueue.client import (
    NEXT_AVAILABLE_SESSION,
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageBatch,
    ServiceBusMessageState,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSession,
    ServiceBusSubQueue,
    ServiceBusTransaction,
)
from sbqueue.engine import Entity, Namespace, SendResult, SettleResult, Topic
from sbqueue.management import ServiceBusAdministrationClient

__all__ = [
    "NEXT_AVAILABLE_SESSION",
    "AutoLockRenewer",
    "Entity",
    "Namespace",
    "SendResult",
    "ServiceBusAdministrationClient",
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
    "SettleResult",
    "Topic",
]
__version__ = "0.1.0"
