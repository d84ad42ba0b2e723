"""sbqueue: Azure Service Bus partitioned queues and topics on Spark and Delta Lake.

Two faces over one engine: the client shaped like azure-servicebus (``ServiceBusClient``)
and the Spark-native DataFrame API (``Namespace``): queues, topics with subscriptions and
rules, sessions and transactions.
"""

from __future__ import annotations

# Ported programs that only ``import concurrent`` use ``concurrent.futures``, which the SDK's
# own import loads; so does this one.
import concurrent.futures  # noqa: F401

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
from sbqueue.client.convert import typed_properties
from sbqueue.core.connection import ServiceBusConnectionStringProperties, parse_connection_string
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
    "ServiceBusConnectionStringProperties",
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
    "parse_connection_string",
    "typed_properties",
]
__version__ = "0.1.0"
