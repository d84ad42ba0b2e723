"""Prometheus metrics of a namespace and of the client operations of this process.

``NamespaceCollector`` reads every entity when scraped (the engine's own reads: on the
driver where the local executor serves, no Spark job) and reports, per entity and
partition, the messages by kind and their bytes, and per entity the age of the oldest
active message. ``OperationMetrics`` times this process's client operations (send,
receive, complete, ...; ``sbqueue.client.observe``). ``sbqueue explorer`` serves both at
``/metrics``; an application exposes the same with ``expose(namespace)`` and
``prometheus_client.start_http_server``. The names are in docs/explorer.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sbqueue.client.convert import to_received
from sbqueue.client.enums import ServiceBusMessageState
from sbqueue.client.observe import watch
from sbqueue.core.clock import utcnow
from sbqueue.core.names import SUBSCRIPTIONS_SEGMENT
from sbqueue.engine.entity import Entity

if TYPE_CHECKING:
    from sbqueue.engine.namespace import Namespace

__all__ = ["KINDS", "NamespaceCollector", "OperationMetrics", "expose"]

KINDS = ("active", "scheduled", "dead_letter", "transfer", "transfer_dead_letter")
"""The message kinds counted per partition (S16.2), each a gauge ``sbqueue_<kind>_messages``."""

_OLDEST_LOOK = 100  # messages peeked to find the oldest active one
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class NamespaceCollector(Collector):
    """The namespace's counts, read when Prometheus scrapes (never cached: a scrape shows
    what the tables hold then)."""

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace

    def describe(self) -> list[Metric]:
        return []  # registering must not read the namespace

    def collect(self) -> Iterator[Metric]:
        start = time.perf_counter()
        families = {kind: GaugeMetricFamily(
            f"sbqueue_{kind}_messages", f"{kind.replace('_', '-')} messages (S16.2)",
            labels=["entity", "partition"]) for kind in KINDS}
        size = GaugeMetricFamily("sbqueue_size_bytes", "bytes of the messages held",
                                 labels=["entity", "partition"])
        oldest = GaugeMetricFamily(
            "sbqueue_oldest_active_message_age_seconds",
            "age of the oldest active message (0 when none)", labels=["entity"])
        scheduled_at_topic = GaugeMetricFamily(
            "sbqueue_topic_scheduled_messages", "scheduled messages waiting at a topic (S8.5)",
            labels=["entity"])
        for entity in self._entities():
            for partition, counts in entity.partition_tallies().items():
                labels = [entity.path, str(partition)]
                for kind in KINDS:
                    families[kind].add_metric(labels, counts[kind])
                size.add_metric(labels, counts["size_in_bytes"])
            oldest.add_metric([entity.path], oldest_active_age(entity))
        for topic in self.namespace.catalog.entities("topic"):
            scheduled_at_topic.add_metric([topic.name],
                                          self.namespace.topic(topic.name).scheduled_count())
        yield from families.values()
        yield from (size, oldest, scheduled_at_topic)
        took = GaugeMetricFamily("sbqueue_scrape_seconds", "time this scrape took to read")
        took.add_metric([], time.perf_counter() - start)
        yield took

    def _entities(self) -> Iterator[Entity]:
        catalog = self.namespace.catalog
        for queue in catalog.entities("queue"):
            yield self.namespace.entity(queue.name)
        for topic in catalog.entities("topic"):
            for sub in catalog.entities("subscription", topic.name):
                yield self.namespace.entity(f"{topic.name}/{SUBSCRIPTIONS_SEGMENT}/{sub.name}")


def oldest_active_age(entity: Entity) -> float:
    """Seconds since the oldest active message among the first ones a peek shows (peek's
    order is enqueued time, S9.2); 0 when none is active."""
    for row in entity.peek_rows(_OLDEST_LOOK):
        message = to_received(row)
        if message.state == ServiceBusMessageState.ACTIVE and \
                message.enqueued_time_utc is not None:
            return max(0.0, (utcnow() - message.enqueued_time_utc).total_seconds())
    return 0.0


class OperationMetrics:
    """``sbqueue_operation_seconds{operation, entity, outcome}``: a histogram of every
    client operation this process runs (its ``_count`` is the number of operations)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.histogram = Histogram(
            "sbqueue_operation_seconds", "client operations of this process and their time",
            ["operation", "entity", "outcome"], registry=registry, buckets=_BUCKETS)
        self._stop: Callable[[], None] | None = watch(self._observe)

    def _observe(self, operation: str, entity: str, seconds: float, outcome: str) -> None:
        self.histogram.labels(operation, entity, outcome).observe(seconds)

    def close(self) -> None:
        """Stop timing (the histogram keeps what it has)."""
        if self._stop is not None:
            self._stop()
            self._stop = None


def expose(namespace: Namespace, registry: CollectorRegistry = REGISTRY) -> OperationMetrics:
    """Register the namespace's counts and this process's operation times in ``registry``
    (Prometheus's default one unless given); serve them with ``start_http_server``."""
    registry.register(NamespaceCollector(namespace))
    return OperationMetrics(registry)
