"""The asyncio shape of the client, as ``azure.servicebus.aio`` (issue 20 point 5):
``from azure.servicebus.aio import ServiceBusClient`` becomes
``from sbqueue.aio import ServiceBusClient``."""

from sbqueue.aio._client import (
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSession,
)

__all__ = ["AutoLockRenewer", "ServiceBusClient", "ServiceBusReceiver", "ServiceBusSender",
           "ServiceBusSession"]
