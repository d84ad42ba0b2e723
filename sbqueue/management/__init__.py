"""Administration: namespaces and entity definitions, shaped like azure-servicebus."""

from __future__ import annotations

from sbqueue.core.properties import (
    ApiVersion,
    EntityAvailabilityStatus,
    EntityStatus,
    NamespaceProperties,
    QueueProperties,
    Sku,
    SubscriptionProperties,
    TopicProperties,
)
from sbqueue.core.rules import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)
from sbqueue.management.admin import ServiceBusAdministrationClient
from sbqueue.management.runtime import (
    QueueRuntimeProperties,
    SubscriptionRuntimeProperties,
    TopicRuntimeProperties,
)

__all__ = [
    "ApiVersion",
    "CorrelationRuleFilter",
    "EntityAvailabilityStatus",
    "EntityStatus",
    "FalseRuleFilter",
    "NamespaceProperties",
    "QueueProperties",
    "QueueRuntimeProperties",
    "RuleProperties",
    "ServiceBusAdministrationClient",
    "Sku",
    "SqlRuleAction",
    "SqlRuleFilter",
    "SubscriptionProperties",
    "SubscriptionRuntimeProperties",
    "TopicProperties",
    "TopicRuntimeProperties",
    "TrueRuleFilter",
]
