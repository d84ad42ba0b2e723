"""Administration: namespaces and entity definitions, shaped like azure-servicebus."""

from __future__ import annotations

from sbqueue.core.properties import (
    EntityAvailabilityStatus,
    EntityStatus,
    NamespaceProperties,
    QueueProperties,
    Sku,
    SubscriptionProperties,
    TopicProperties,
)
from sbqueue.management.admin import ServiceBusAdministrationClient
from sbqueue.management.runtime import (
    QueueRuntimeProperties,
    SubscriptionRuntimeProperties,
    TopicRuntimeProperties,
)

__all__ = [
    "EntityAvailabilityStatus",
    "EntityStatus",
    "NamespaceProperties",
    "QueueProperties",
    "QueueRuntimeProperties",
    "ServiceBusAdministrationClient",
    "Sku",
    "SubscriptionProperties",
    "SubscriptionRuntimeProperties",
    "TopicProperties",
    "TopicRuntimeProperties",
]
