"""Runtime properties of queues, topics and subscriptions (SPEC S16.2), summed over
partitions: counts and bytes from the entity's messages (one query), times from the Delta
logs. Reads only: nothing here commits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sbqueue.core.names import SUBSCRIPTIONS_SEGMENT
from sbqueue.core.properties import (
    EntityAvailabilityStatus,
    EntityDefinition,
    QueueProperties,
    SubscriptionProperties,
    TopicProperties,
)
from sbqueue.engine.reads.view import last_commit

if TYPE_CHECKING:
    from sbqueue.engine.entity import Entity
    from sbqueue.engine.namespace import Namespace

__all__ = [
    "QueueRuntimeProperties",
    "SubscriptionRuntimeProperties",
    "TopicRuntimeProperties",
    "queue_runtime",
    "subscription_runtime",
    "topic_runtime",
]


@dataclass(frozen=True)
class QueueRuntimeProperties:
    """Counts and times of a queue, summed over its partitions (S16.2)."""

    name: str
    active_message_count: int
    dead_letter_message_count: int
    scheduled_message_count: int
    transfer_message_count: int
    transfer_dead_letter_message_count: int
    total_message_count: int
    size_in_bytes: int
    created_at_utc: datetime | None
    updated_at_utc: datetime | None
    accessed_at_utc: datetime | None
    availability_status: EntityAvailabilityStatus


@dataclass(frozen=True)
class SubscriptionRuntimeProperties:
    """Counts and times of a subscription (S16.2)."""

    name: str
    topic_name: str
    active_message_count: int
    dead_letter_message_count: int
    transfer_message_count: int
    transfer_dead_letter_message_count: int
    total_message_count: int
    created_at_utc: datetime | None
    updated_at_utc: datetime | None
    accessed_at_utc: datetime | None


@dataclass(frozen=True)
class TopicRuntimeProperties:
    """A topic's subscriptions and the bytes its subscriptions hold (S16.2)."""

    name: str
    subscription_count: int
    scheduled_message_count: int
    size_in_bytes: int
    created_at_utc: datetime | None
    updated_at_utc: datetime | None
    accessed_at_utc: datetime | None
    availability_status: EntityAvailabilityStatus


def _accessed(last: datetime | None, props: EntityDefinition) -> datetime | None:
    """The last message activity, never before the entity's creation (its tables are made
    just before its definition is published)."""
    times = [t for t in (last, props.created_at_utc) if t is not None]
    return max(times) if times else None


def _availability(ns: Namespace, entity_id: str) -> EntityAvailabilityStatus:
    """Limited while a partition is unavailable (S14.2), else Available."""
    if ns.catalog.fenced(entity_id):
        return EntityAvailabilityStatus.LIMITED
    return EntityAvailabilityStatus.AVAILABLE


def queue_runtime(ns: Namespace, queue: QueueProperties) -> QueueRuntimeProperties:
    entity = ns.entity(queue.name)
    counts = entity.counts()
    return QueueRuntimeProperties(
        name=queue.name,
        active_message_count=counts["active"],
        dead_letter_message_count=counts["dead_letter"],
        scheduled_message_count=counts["scheduled"],
        transfer_message_count=counts["transfer"],
        transfer_dead_letter_message_count=counts["transfer_dead_letter"],
        total_message_count=counts["total"],
        size_in_bytes=counts["size_in_bytes"],
        created_at_utc=queue.created_at_utc,
        updated_at_utc=queue.updated_at_utc,
        accessed_at_utc=_accessed(entity.accessed_at(), queue),
        availability_status=_availability(ns, queue.entity_id),
    )


def _subscription(ns: Namespace, topic: TopicProperties, sub: SubscriptionProperties
                  ) -> Entity:
    """A subscription reads its copies of its topic's inbox through its own ledger."""
    return ns.entity(f"{topic.name}/{SUBSCRIPTIONS_SEGMENT}/{sub.name}")


def subscription_runtime(ns: Namespace, topic: TopicProperties, sub: SubscriptionProperties
                         ) -> SubscriptionRuntimeProperties:
    entity = _subscription(ns, topic, sub)
    counts = entity.counts()
    return SubscriptionRuntimeProperties(
        name=sub.name, topic_name=topic.name,
        active_message_count=counts["active"],
        dead_letter_message_count=counts["dead_letter"],
        transfer_message_count=counts["transfer"],
        transfer_dead_letter_message_count=counts["transfer_dead_letter"],
        total_message_count=counts["total"],
        created_at_utc=sub.created_at_utc, updated_at_utc=sub.updated_at_utc,
        accessed_at_utc=_accessed(last_commit([entity.ledger]), sub),
    )


def topic_runtime(ns: Namespace, topic: TopicProperties,
                  subs: list[SubscriptionProperties]) -> TopicRuntimeProperties:
    """Bytes summed over the subscriptions' copies; scheduled messages wait at the topic
    (S8.5), each counted once."""
    size = sum(_subscription(ns, topic, sub).counts()["size_in_bytes"] for sub in subs)
    handle = ns.topic(topic.name)
    return TopicRuntimeProperties(
        name=topic.name, subscription_count=len(subs),
        scheduled_message_count=handle.scheduled_count(),
        size_in_bytes=size, created_at_utc=topic.created_at_utc,
        updated_at_utc=topic.updated_at_utc,
        accessed_at_utc=_accessed(last_commit([handle.inbox]), topic),
        availability_status=_availability(ns, topic.entity_id),
    )
