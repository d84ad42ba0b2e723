"""``ServiceBusAdministrationClient``: namespaces and queues, shaped like azure-servicebus.

Topics, subscriptions and rules arrive with their own issues; their methods are not
defined yet rather than defined as stubs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sbqueue.core.names import name_key, validate_entity_path
from sbqueue.core.properties import (
    EntityAvailabilityStatus,
    NamespaceProperties,
    QueueProperties,
    build_queue_properties,
)
from sbqueue.engine.namespace import Namespace
from sbqueue.exceptions import InvalidOperationError, MessagingEntityNotFoundError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["QueueRuntimeProperties", "ServiceBusAdministrationClient", "parse_endpoint"]


def parse_endpoint(connection_string: str) -> str:
    """The ``Endpoint`` of a connection string; other keys are accepted and ignored."""
    for part in connection_string.split(";"):
        key, _, value = part.partition("=")
        if key.strip().lower() == "endpoint" and value.strip():
            endpoint = value.strip()
            return endpoint[len("sb://"):] if endpoint.startswith("sb://") else endpoint
    raise InvalidOperationError(
        f"connection string {connection_string[:60]!r} has no Endpoint=<folder or URI>"
    )


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


class ServiceBusAdministrationClient:
    """Creates, reads, updates and deletes the entities of one namespace."""

    def __init__(self, namespace: str, spark: SparkSession | None = None) -> None:
        self._namespace_root = namespace
        self._spark = spark
        self._namespace: Namespace | None = None

    @classmethod
    def from_connection_string(
        cls, conn_str: str, *, spark: SparkSession | None = None, **_: Any
    ) -> ServiceBusAdministrationClient:
        return cls(parse_endpoint(conn_str), spark=spark)

    @staticmethod
    def create_namespace(
        path: str, sku: str = "Standard", messaging_partitions: int | None = None,
        spark: SparkSession | None = None,
    ) -> NamespaceProperties:
        """Create a namespace explicitly (S1.2); its SKU and partitions never change."""
        return Namespace(path, spark, sku=sku, messaging_partitions=messaging_partitions
                         ).properties

    @property
    def namespace(self) -> Namespace:
        if self._namespace is None:
            self._namespace = Namespace(self._namespace_root, self._spark)
        return self._namespace

    def get_namespace_properties(self) -> NamespaceProperties:
        queues = self.namespace.catalog.list_queues()
        return dataclasses.replace(self.namespace.properties, queue_count=len(queues))

    # -- queues ----------------------------------------------------------------------------
    def create_queue(self, queue_name: str, **kwargs: Any) -> QueueProperties:
        name = validate_entity_path(queue_name)
        ns = self.namespace
        props = build_queue_properties(
            name, kwargs, sku=ns.properties.sku,
            messaging_partitions=ns.properties.messaging_partitions,
        )
        self._check_forwarding(props)
        return ns.create_queue_storage(props)

    def get_queue(self, queue_name: str, **_: Any) -> QueueProperties:
        return self.namespace.catalog.get_queue(validate_entity_path(queue_name))

    def update_queue(self, queue: QueueProperties | dict[str, Any], **kwargs: Any
                     ) -> QueueProperties:
        """Apply a changed ``QueueProperties`` (or a dict of them) plus overrides."""
        if isinstance(queue, QueueProperties):
            name = queue.name
            current = self.get_queue(name)
            changed = {
                f.name: getattr(queue, f.name) for f in dataclasses.fields(QueueProperties)
                if f.name not in ("name", "partition_count", "entity_id", "created_at_utc",
                                  "updated_at_utc")
                and getattr(queue, f.name) != getattr(current, f.name)
            }
        elif isinstance(queue, dict):
            name = queue.get("name", "")
            current = self.get_queue(name)
            changed = {k: v for k, v in queue.items() if k != "name"}
        else:
            raise InvalidOperationError(
                f"update_queue takes QueueProperties or a dict, got {type(queue).__name__}"
            )
        changed.update(kwargs)
        ns = self.namespace
        props = build_queue_properties(
            current.name, changed, sku=ns.properties.sku,
            messaging_partitions=ns.properties.messaging_partitions, base=current,
        )
        self._check_forwarding(props)
        return ns.catalog.replace_queue(props)

    def delete_queue(self, queue_name: str | QueueProperties, **_: Any) -> None:
        name = queue_name.name if isinstance(queue_name, QueueProperties) else queue_name
        self.namespace.delete_queue_storage(validate_entity_path(name))

    def list_queues(self, **_: Any) -> list[QueueProperties]:
        return self.namespace.catalog.list_queues()

    def get_queue_runtime_properties(self, queue_name: str, **_: Any) -> QueueRuntimeProperties:
        entity = self.namespace.entity(validate_entity_path(queue_name))
        counts = entity.counts()
        return QueueRuntimeProperties(
            name=entity.props.name,
            active_message_count=counts["active"],
            dead_letter_message_count=counts["dead_letter"],
            scheduled_message_count=counts["scheduled"],
            transfer_message_count=counts["transfer"],
            transfer_dead_letter_message_count=counts["transfer_dead_letter"],
            total_message_count=counts["total"],
            size_in_bytes=entity.size_in_bytes(),
            created_at_utc=entity.props.created_at_utc,
            updated_at_utc=entity.props.updated_at_utc,
            accessed_at_utc=entity.props.updated_at_utc,
            availability_status=EntityAvailabilityStatus.AVAILABLE,
        )

    def list_queues_runtime_properties(self, **_: Any) -> list[QueueRuntimeProperties]:
        return [self.get_queue_runtime_properties(q.name) for q in self.list_queues()]

    def _check_forwarding(self, props: QueueProperties) -> None:
        """Forward targets must exist, not be the queue itself, and form no cycle (S13.1)."""
        catalog = self.namespace.catalog
        for attr in ("forward_to", "forward_dead_lettered_messages_to"):
            target = getattr(props, attr)
            if target is None:
                continue
            if name_key(target) == name_key(props.name):
                raise InvalidOperationError(
                    f"{attr}={target!r}: a queue cannot forward to itself (S13.1)")
            if not catalog.queue_exists(target):
                raise MessagingEntityNotFoundError(
                    f"{attr}={target!r}: no such queue in the namespace (S13.1)")
        seen = {name_key(props.name)}
        hop = props.forward_to
        while hop is not None:
            if name_key(hop) in seen:
                raise InvalidOperationError(
                    f"forward_to={props.forward_to!r} makes a forwarding cycle through "
                    f"{hop!r} (S13.1)")
            seen.add(name_key(hop))
            hop = catalog.get_queue(hop).forward_to if catalog.queue_exists(hop) else None

    def close(self) -> None:
        self._namespace = None

    def __enter__(self) -> ServiceBusAdministrationClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
