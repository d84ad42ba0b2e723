"""The namespace's catalog: its settings and its entity definitions, as JSON documents.

Layout under the namespace root::

    _sbqueue/namespace.json             sku, partitions, creation time (S1.1, S1.2)
    _sbqueue/entities/<key>.json        one definition per queue or topic (key: case-folded
                                        name)
    _sbqueue/subscriptions/<key>.json   one per subscription, with its rules (S15.1)
    entities/<entity_id>/inbox|ledger   the entity's Delta tables (id: new per create)

An entity's data folder is named by a fresh id, never by its name, so no name can reach
outside the root and a re-created queue never sees the old one's data.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from sbqueue.core.clock import utcnow
from sbqueue.core.names import name_key
from sbqueue.core.properties import (
    EntityDefinition,
    NamespaceProperties,
    QueueProperties,
    Sku,
    SubscriptionProperties,
    TopicProperties,
)
from sbqueue.core.rules import RuleProperties
from sbqueue.exceptions import (
    MessagingEntityAlreadyExistsError,
    MessagingEntityNotFoundError,
    ServiceBusQuotaExceededError,
)
from sbqueue.store.documents import DocumentExists, DocumentStore

__all__ = ["MAX_ENTITIES", "MAX_PARTITIONED_ENTITIES", "MAX_SUBSCRIPTIONS", "Catalog"]

MAX_ENTITIES = 10_000
MAX_PARTITIONED_ENTITIES = 100
MAX_SUBSCRIPTIONS = 2000
_NAMESPACE_DOC = "_sbqueue/namespace.json"
_ENTITIES = "_sbqueue/entities"  # queues and topics: one name space (S1.7)
_SUBSCRIPTIONS = "_sbqueue/subscriptions"
_AVAILABILITY = "_sbqueue/availability"  # fenced partitions per entity id (S14.2)
_KINDS: dict[str, type[EntityDefinition]] = {
    "queue": QueueProperties, "topic": TopicProperties, "subscription": SubscriptionProperties,
}

D = TypeVar("D", bound=EntityDefinition)


def _doc_name(kind: str, name: str, topic: str | None = None) -> str:
    if kind == "subscription":
        key, folder = f"{name_key(topic or '')}\x00{name_key(name)}", _SUBSCRIPTIONS
    else:
        key, folder = name_key(name), _ENTITIES
    return f"{folder}/{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def _describe(kind: str, name: str, topic: str | None) -> str:
    return f"subscription {name!r} of topic {topic!r}" if kind == "subscription" \
        else f"{kind} {name!r}"


class Catalog:
    """Reads and writes definitions; enforces uniqueness and the quotas of S1.5, S15.1."""

    def __init__(self, documents: DocumentStore, root: str) -> None:
        self.documents = documents
        self.root = root.rstrip("/")

    # -- namespace -------------------------------------------------------------------------
    def namespace(self) -> NamespaceProperties | None:
        doc = self.documents.read(_NAMESPACE_DOC)
        if doc is None:
            return None
        return NamespaceProperties(
            name=self.root,
            sku=Sku(doc["sku"]),
            messaging_partitions=int(doc["messaging_partitions"]),
            created_at_utc=datetime.fromisoformat(doc["created_at_utc"]),
        )

    def create_namespace(self, sku: Sku, messaging_partitions: int) -> NamespaceProperties:
        """Create the namespace document; if it exists, return the existing settings."""
        doc = {
            "sku": sku.value,
            "messaging_partitions": messaging_partitions,
            "created_at_utc": utcnow().isoformat(),
            "format": 1,
        }
        with contextlib.suppress(DocumentExists):  # a concurrent creator won: use theirs
            self.documents.create(_NAMESPACE_DOC, doc)
        found = self.namespace()
        assert found is not None
        return found

    # -- entities --------------------------------------------------------------------------
    def data_path(self, entity_id: str, table: str) -> str:
        return f"{self.root}/entities/{entity_id}/{table}"

    def _read(self, kind: str, name: str, topic: str | None = None) -> dict[str, Any] | None:
        doc = self.documents.read(_doc_name(kind, name, topic))
        return doc if doc is not None and doc.get("kind") == kind else None

    def get(self, kind: str, name: str, topic: str | None = None) -> Any:
        """The definition of a queue, topic or subscription, or MessagingEntityNotFound."""
        doc = self._read(kind, name, topic)
        if doc is None:
            raise MessagingEntityNotFoundError(
                f"{_describe(kind, name, topic)} does not exist in {self.root}")
        return _KINDS[kind].from_json(doc["properties"])

    def exists(self, kind: str, name: str, topic: str | None = None) -> bool:
        return self._read(kind, name, topic) is not None

    def _docs(self, folder: str) -> list[dict[str, Any]]:
        docs = (self.documents.read(n) for n in self.documents.list(folder))
        return [d for d in docs if d is not None]

    def entities(self, kind: str, topic: str | None = None) -> list[Any]:
        folder = _SUBSCRIPTIONS if kind == "subscription" else _ENTITIES
        found: list[Any] = [_KINDS[kind].from_json(d["properties"]) for d in self._docs(folder)
                 if d.get("kind") == kind]
        if topic is not None:
            found = [f for f in found if name_key(f.topic_name) == name_key(topic)]
        return sorted(found, key=lambda f: name_key(f.name))

    def create(self, kind: str, props: D, extra: dict[str, Any] | None = None) -> D:
        """Store a new definition (and ``extra`` keys: a subscription's rules); of two
        concurrent creators of a name, one wins."""
        topic = getattr(props, "topic_name", None) if kind == "subscription" else None
        doc_name = _doc_name(kind, props.name, topic)
        with self.documents.lock("catalog"):
            if self.documents.read(doc_name) is not None:
                raise MessagingEntityAlreadyExistsError(
                    f"{_describe(kind, props.name, topic)}: that name is taken in {self.root} "
                    "(names are case-insensitive, S1.7)")
            entities = self._docs(_ENTITIES)
            subscriptions = self._docs(_SUBSCRIPTIONS)
            if len(entities) + len(subscriptions) >= MAX_ENTITIES:
                raise ServiceBusQuotaExceededError(
                    f"namespace {self.root} holds {len(entities) + len(subscriptions)} "
                    f"entities; at most {MAX_ENTITIES} (S1.5)")
            if kind == "subscription":
                siblings = sum(1 for d in subscriptions
                               if name_key(d["properties"]["topic_name"]) == name_key(topic or ""))
                if siblings >= MAX_SUBSCRIPTIONS:
                    raise ServiceBusQuotaExceededError(
                        f"topic {topic!r} has {siblings} subscriptions; at most "
                        f"{MAX_SUBSCRIPTIONS} (S15.1)")
            ns = self.namespace()
            if getattr(props, "enable_partitioning", False) and ns is not None \
                    and ns.sku is Sku.STANDARD:
                partitioned = sum(1 for d in entities
                                  if d["properties"].get("enable_partitioning"))
                if partitioned >= MAX_PARTITIONED_ENTITIES:
                    raise ServiceBusQuotaExceededError(
                        f"cannot create partitioned {kind} {props.name!r}: the namespace has "
                        f"{partitioned} partitioned queues and topics; at most "
                        f"{MAX_PARTITIONED_ENTITIES} on Standard (S1.5)")
            now = utcnow()
            props.entity_id = props.entity_id or uuid.uuid4().hex
            props.created_at_utc = props.updated_at_utc = now
            try:
                self.documents.create(doc_name, {"kind": kind, "properties": props.to_json(),
                                                 **(extra or {})})
            except DocumentExists:
                raise MessagingEntityAlreadyExistsError(
                    f"{_describe(kind, props.name, topic)} already exists in {self.root} (S1.7)"
                ) from None
        return props

    def replace(self, kind: str, props: D) -> D:
        topic = getattr(props, "topic_name", None) if kind == "subscription" else None
        props.updated_at_utc = utcnow()
        name = _doc_name(kind, props.name, topic)
        with self.documents.lock("catalog"):  # keeps the document's other keys (rules)
            doc = self.documents.read(name) or {}
            self.documents.replace(name, {**doc, "kind": kind, "properties": props.to_json()})
        return props

    # -- rules of a subscription (S15.1) ---------------------------------------------------
    def rules(self, topic: str, subscription: str) -> list[RuleProperties]:
        doc = self._read("subscription", subscription, topic)
        if doc is None:
            raise MessagingEntityNotFoundError(
                f"{_describe('subscription', subscription, topic)} does not exist in "
                f"{self.root}")
        return [RuleProperties.from_json(r) for r in doc.get("rules", [])]

    def change_rules(self, topic: str, subscription: str,
                     change: Callable[[list[RuleProperties]], list[RuleProperties]]
                     ) -> list[RuleProperties]:
        """Read, change and write a subscription's rules under the catalog lock."""
        name = _doc_name("subscription", subscription, topic)
        with self.documents.lock("catalog"):
            rules = change(self.rules(topic, subscription))
            doc = self.documents.read(name) or {}
            self.documents.replace(name, {**doc, "rules": [r.to_json() for r in rules]})
        return rules

    def topic_rules(self, topic: str) -> list[tuple[SubscriptionProperties, list[RuleProperties]]]:
        """Every subscription of ``topic`` with its rules, in one pass over the catalog."""
        found = []
        for doc in self._docs(_SUBSCRIPTIONS):
            if doc.get("kind") != "subscription" or \
                    name_key(doc["properties"]["topic_name"]) != name_key(topic):
                continue
            found.append((SubscriptionProperties.from_json(doc["properties"]),
                          [RuleProperties.from_json(r) for r in doc.get("rules", [])]))
        return sorted(found, key=lambda f: name_key(f[0].name))

    def delete(self, kind: str, name: str, topic: str | None = None) -> Any:
        props = self.get(kind, name, topic)
        if not self.documents.delete(_doc_name(kind, name, topic)):
            raise MessagingEntityNotFoundError(
                f"{_describe(kind, name, topic)} does not exist in {self.root}")
        return props

    # -- partition availability (S14.2) --------------------------------------------------
    def fenced(self, entity_id: str) -> frozenset[int]:
        """The partitions of an entity its administrator made unavailable."""
        doc = self.documents.read(f"{_AVAILABILITY}/{entity_id}.json")
        return frozenset(int(p) for p in (doc or {}).get("unavailable", []))

    def set_fenced(self, entity_id: str, partition: int, fenced: bool) -> frozenset[int]:
        """Fence or unfence one partition; the new set (read-modify-write under a lock)."""
        name = f"{_AVAILABILITY}/{entity_id}.json"
        with self.documents.lock(f"availability-{entity_id}"):
            current = set(self.fenced(entity_id))
            (current.add if fenced else current.discard)(partition)
            self.documents.replace(name, {"unavailable": sorted(current)})
        return frozenset(current)

    # Queue shorthands used by the engine.
    def get_queue(self, name: str) -> QueueProperties:
        props: QueueProperties = self.get("queue", name)
        return props

    def queue_exists(self, name: str) -> bool:
        return self.exists("queue", name)

    def list_queues(self) -> list[QueueProperties]:
        return self.entities("queue")
