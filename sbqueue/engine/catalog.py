"""The namespace's catalog: its settings and its entity definitions, as JSON documents.

Layout under the namespace root::

    _sbqueue/namespace.json             sku, partitions, creation time (S1.1, S1.2)
    _sbqueue/entities/<key>.json        one definition per queue or topic (key: case-folded
                                        name)
    _sbqueue/subscriptions/<key>.json   one per subscription, with its rules (S15.1)
    entities/<entity_id>/inbox|ledger   the entity's Delta tables (id: new per create)

An entity's data folder is named by a fresh id, never by its name, so no name can reach
outside the root and a re-created queue never sees the old one's data.

A definition goes creating -> ready -> deleting (``core.lifecycle``); only ready ones are
entities. Every change is a conditional write of the version read, retried on a conflict
with a re-read and a re-applied change (docs/decisions/020-safe-catalog.md).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import random
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from sbqueue.core.clock import utcnow
from sbqueue.core.lifecycle import CREATING, DELETING, READY, is_ready, moved, revised, state_of
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
    StorageConflictError,
)
from sbqueue.store.documents import DocumentConflict, DocumentExists, DocumentStore
from sbqueue.store.memo import made_once

__all__ = ["MAX_ENTITIES", "MAX_PARTITIONED_ENTITIES", "MAX_SUBSCRIPTIONS", "Catalog"]

MAX_ENTITIES = 10_000
MAX_PARTITIONED_ENTITIES = 100
MAX_SUBSCRIPTIONS = 2000
_NAMESPACE_DOC = "_sbqueue/namespace.json"
_ENTITIES = "_sbqueue/entities"  # queues and topics: one name space (S1.7)
_SUBSCRIPTIONS = "_sbqueue/subscriptions"
_AVAILABILITY = "_sbqueue/availability"  # fenced partitions per entity id (S14.2)
_MADE_BOUND = 1024  # definitions kept made (``Catalog.get``): past it, all are dropped
_KINDS: dict[str, type[EntityDefinition]] = {
    "queue": QueueProperties, "topic": TopicProperties, "subscription": SubscriptionProperties,
}

_ATTEMPTS = 12  # conditional writes of one definition before giving up (decision 020)
D = TypeVar("D", bound=EntityDefinition)
Doc = dict[str, Any]


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
        # each definition made from a document, by its kind and the document's token
        self._made: dict[tuple[str, str], EntityDefinition] = {}

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

    def _raw(self, kind: str, name: str, topic: str | None = None) -> Doc | None:
        """The definition of ``kind`` in any state (creating, ready, deleting)."""
        found = self._raw_versioned(kind, name, topic)
        return None if found is None else found[0]

    def _raw_versioned(self, kind: str, name: str, topic: str | None
                       ) -> tuple[Doc, str] | None:
        """``_raw`` with the document's token (its bytes' hash)."""
        found = self.documents.read_versioned(_doc_name(kind, name, topic))
        return found if found is not None and found[0].get("kind") == kind else None

    def _read(self, kind: str, name: str, topic: str | None = None) -> Doc | None:
        doc = self._raw(kind, name, topic)
        return doc if is_ready(doc) else None

    def _missing(self, kind: str, name: str, topic: str | None) -> MessagingEntityNotFoundError:
        return MessagingEntityNotFoundError(
            f"{_describe(kind, name, topic)} does not exist in {self.root}")

    def get(self, kind: str, name: str, topic: str | None = None) -> Any:
        """The definition of a queue, topic or subscription, or MessagingEntityNotFound.
        Every operation reads its entity's definition again (S16.1: a status change
        takes effect at once); one made from the same document bytes is copied, not
        parsed again (``from_json`` was a fifth of a driver send's time outside its
        commit, decision 052)."""
        found = self._raw_versioned(kind, name, topic)
        if found is None or not is_ready(found[0]):
            raise self._missing(kind, name, topic)
        doc, token = found
        made = made_once(self._made, (kind, token),
                         lambda: _KINDS[kind].from_json(doc["properties"]), _MADE_BOUND)
        return copy.copy(made)  # a caller may set a field of its own copy

    def exists(self, kind: str, name: str, topic: str | None = None) -> bool:
        return self._read(kind, name, topic) is not None

    def pending(self, kind: str, name: str, topic: str | None = None) -> tuple[str, Any] | None:
        """``(state, properties)`` of a definition left creating or deleting, else None."""
        doc = self._raw(kind, name, topic)
        if doc is None or is_ready(doc):
            return None
        return state_of(doc), _KINDS[kind].from_json(doc["properties"])

    def _docs(self, folder: str) -> list[Doc]:
        return self.documents.read_all(folder)

    def entities(self, kind: str, topic: str | None = None, *, every: bool = False) -> list[Any]:
        """The ready entities of ``kind`` (of ``topic``); ``every``: in any state."""
        folder = _SUBSCRIPTIONS if kind == "subscription" else _ENTITIES
        found: list[Any] = [_KINDS[kind].from_json(d["properties"]) for d in self._docs(folder)
                            if d.get("kind") == kind and (every or is_ready(d))]
        if topic is not None:
            found = [f for f in found if name_key(f.topic_name) == name_key(topic)]
        return sorted(found, key=lambda f: name_key(f.name))

    def _check_quotas(self, kind: str, props: EntityDefinition, topic: str | None) -> None:
        """S1.5 and S15.1; definitions in any state hold their place."""
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
            partitioned = sum(1 for d in entities if d["properties"].get("enable_partitioning"))
            if partitioned >= MAX_PARTITIONED_ENTITIES:
                raise ServiceBusQuotaExceededError(
                    f"cannot create partitioned {kind} {props.name!r}: the namespace has "
                    f"{partitioned} partitioned queues and topics; at most "
                    f"{MAX_PARTITIONED_ENTITIES} on Standard (S1.5)")

    def create(self, kind: str, props: D, extra: dict[str, Any] | None = None) -> D:
        """Store a new definition, marked creating (``extra``: a subscription's rules); of
        two concurrent creators of a name, one wins. The caller makes the tables, then
        ``publish``-es it."""
        topic = getattr(props, "topic_name", None) if kind == "subscription" else None
        doc_name = _doc_name(kind, props.name, topic)
        with self.documents.lock("catalog"):
            if self.documents.read(doc_name) is not None:
                raise MessagingEntityAlreadyExistsError(
                    f"{_describe(kind, props.name, topic)}: that name is taken in {self.root} "
                    "(names are case-insensitive, S1.7)")
            self._check_quotas(kind, props, topic)
            props.entity_id = props.entity_id or uuid.uuid4().hex
            props.created_at_utc = props.updated_at_utc = utcnow()
            try:
                self.documents.create(doc_name, {"kind": kind, "properties": props.to_json(),
                                                 "state": CREATING, "revision": 1,
                                                 **(extra or {})})
            except DocumentExists:
                raise MessagingEntityAlreadyExistsError(
                    f"{_describe(kind, props.name, topic)} already exists in {self.root} (S1.7)"
                ) from None
        return props

    def _modify(self, doc_name: str, change: Callable[[Doc | None], Doc | None],
                what: str) -> Doc | None:
        """Read, ``change`` and write back one document, only over the version read; on a
        conflict re-read and re-apply. ``change`` returns the new document, None to remove
        it, or its argument itself to leave it as it is."""
        for attempt in range(_ATTEMPTS):
            found = self.documents.read_versioned(doc_name)
            doc, token = found if found is not None else (None, None)
            new = change(doc)
            if new is doc:
                return doc
            try:
                if new is None:
                    self.documents.delete(doc_name, expected=token)
                elif token is None:
                    self.documents.create(doc_name, new)
                else:
                    self.documents.replace(doc_name, new, expected=token)
                return new
            except (DocumentConflict, DocumentExists):
                time.sleep(min(1.0, 0.01 * 2 ** attempt) * (0.5 + random.random()))
        raise StorageConflictError(
            f"{what}: its definition in {self.root} kept changing under {_ATTEMPTS} "
            "conditional writes; nothing was changed: try again")

    def update(self, kind: str, name: str, topic: str | None,
               change: Callable[[D], D]) -> D:
        """Apply ``change`` to the current ready definition (re-applied to a fresher one if
        another writer got there first: no update is lost); its identity is kept."""
        result: list[D] = []

        def apply(doc: Doc | None) -> Doc:
            if not is_ready(doc):
                raise self._missing(kind, name, topic)
            assert doc is not None
            current: D = _KINDS[kind].from_json(doc["properties"])  # type: ignore[assignment]
            new = change(current)
            new.entity_id, new.created_at_utc = current.entity_id, current.created_at_utc
            new.updated_at_utc = utcnow()
            result[:] = [new]
            return revised(doc, properties=new.to_json())

        self._modify(_doc_name(kind, name, topic), apply, _describe(kind, name, topic))
        return result[0]

    def replace(self, kind: str, props: D) -> D:
        """Write ``props`` over the ready definition of that name (the last writer wins)."""
        topic = getattr(props, "topic_name", None) if kind == "subscription" else None
        return self.update(kind, props.name, topic, lambda _current: props)

    def publish(self, kind: str, props: D) -> D:
        """Mark a creating definition ready once its tables exist; MessagingEntityNotFound
        if it was deleted (or replaced) meanwhile."""
        topic = getattr(props, "topic_name", None) if kind == "subscription" else None

        def ready(doc: Doc | None) -> Doc | None:
            if doc is None or doc["properties"].get("entity_id") != props.entity_id \
                    or state_of(doc) == DELETING:
                raise MessagingEntityNotFoundError(
                    f"{_describe(kind, props.name, topic)} was deleted in {self.root} while it "
                    "was being created")
            return doc if is_ready(doc) else moved(doc, READY)

        self._modify(_doc_name(kind, props.name, topic), ready, _describe(kind, props.name,
                                                                           topic))
        return props

    def mark_deleting(self, kind: str, name: str, topic: str | None = None) -> tuple[Any, bool]:
        """Mark a definition deleting (from then on it is no entity): its properties, and
        whether this call marked it (False: it was deleting already, a crashed or concurrent
        delete to finish). MessagingEntityNotFound if there is none."""
        marked = [False]

        def mark(doc: Doc | None) -> Doc:
            if doc is None or doc.get("kind") != kind:
                raise self._missing(kind, name, topic)
            if state_of(doc) == DELETING:
                return doc
            marked[0] = True
            return moved(doc, DELETING)

        doc = self._modify(_doc_name(kind, name, topic), mark, _describe(kind, name, topic))
        assert doc is not None
        return _KINDS[kind].from_json(doc["properties"]), marked[0]

    def forget(self, kind: str, name: str, topic: str | None, entity_id: str) -> bool:
        """Remove a definition not ready (deleting, or a creating one being undone) if it
        still names ``entity_id``; whether one was removed."""
        removed = [False]

        def drop(doc: Doc | None) -> Doc | None:
            if doc is None or is_ready(doc) or doc["properties"].get("entity_id") != entity_id:
                return doc
            removed[0] = True
            return None

        self._modify(_doc_name(kind, name, topic), drop, _describe(kind, name, topic))
        return removed[0]

    # -- rules of a subscription (S15.1) ---------------------------------------------------
    def rules(self, topic: str, subscription: str) -> list[RuleProperties]:
        doc = self._read("subscription", subscription, topic)
        if doc is None:
            raise self._missing("subscription", subscription, topic)
        return [RuleProperties.from_json(r) for r in doc.get("rules", [])]

    def change_rules(self, topic: str, subscription: str,
                     change: Callable[[list[RuleProperties]], list[RuleProperties]]
                     ) -> list[RuleProperties]:
        """Change a subscription's rules by a conditional write (re-applied on a conflict)."""
        result: list[RuleProperties] = []

        def apply(doc: Doc | None) -> Doc:
            if not is_ready(doc):
                raise self._missing("subscription", subscription, topic)
            assert doc is not None
            result[:] = change([RuleProperties.from_json(r) for r in doc.get("rules", [])])
            return revised(doc, rules=[r.to_json() for r in result])

        self._modify(_doc_name("subscription", subscription, topic), apply,
                     _describe("subscription", subscription, topic))
        return result

    def topic_rules(self, topic: str) -> list[tuple[SubscriptionProperties, list[RuleProperties]]]:
        """Every subscription of ``topic`` with its rules, in one pass over the catalog."""
        found = []
        for doc in self._docs(_SUBSCRIPTIONS):
            if doc.get("kind") != "subscription" or not is_ready(doc) or \
                    name_key(doc["properties"]["topic_name"]) != name_key(topic):
                continue
            found.append((SubscriptionProperties.from_json(doc["properties"]),
                          [RuleProperties.from_json(r) for r in doc.get("rules", [])]))
        return sorted(found, key=lambda f: name_key(f[0].name))

    # -- partition availability (S14.2) --------------------------------------------------
    def fenced(self, entity_id: str) -> frozenset[int]:
        """The partitions of an entity its administrator made unavailable."""
        doc = self.documents.read(f"{_AVAILABILITY}/{entity_id}.json")
        return frozenset(int(p) for p in (doc or {}).get("unavailable", []))

    def set_fenced(self, entity_id: str, partition: int, fenced: bool) -> frozenset[int]:
        """Fence or unfence one partition; the new set (a conditional write)."""
        def apply(doc: Doc | None) -> Doc:
            current = {int(p) for p in (doc or {}).get("unavailable", [])}
            (current.add if fenced else current.discard)(partition)
            return {"unavailable": sorted(current)}

        doc = self._modify(f"{_AVAILABILITY}/{entity_id}.json", apply,
                           f"availability of entity {entity_id}")
        return frozenset(int(p) for p in (doc or {}).get("unavailable", []))

    # Queue shorthands used by the engine.
    def get_queue(self, name: str) -> QueueProperties:
        props: QueueProperties = self.get("queue", name)
        return props

    def queue_exists(self, name: str) -> bool:
        return self.exists("queue", name)

    def list_queues(self) -> list[QueueProperties]:
        return self.entities("queue")
