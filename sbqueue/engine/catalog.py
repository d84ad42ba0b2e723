"""The namespace's catalog: its settings and its entity definitions, as JSON documents.

Layout under the namespace root::

    _sbqueue/namespace.json             sku, partitions, creation time (S1.1, S1.2)
    _sbqueue/entities/<key>.json        one definition per queue (key: case-folded name)
    entities/<entity_id>/inbox|ledger   the entity's Delta tables (id: new per create)

An entity's data folder is named by a fresh id, never by its name, so no name can reach
outside the root and a re-created queue never sees the old one's data.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from datetime import datetime, timezone
from typing import Any

from sbqueue.core.names import name_key
from sbqueue.core.properties import NamespaceProperties, QueueProperties, Sku
from sbqueue.exceptions import (
    MessagingEntityAlreadyExistsError,
    MessagingEntityNotFoundError,
    ServiceBusQuotaExceededError,
)
from sbqueue.store.documents import DocumentExists, DocumentStore

__all__ = ["MAX_ENTITIES", "MAX_PARTITIONED_ENTITIES", "Catalog"]

MAX_ENTITIES = 10_000
MAX_PARTITIONED_ENTITIES = 100
_NAMESPACE_DOC = "_sbqueue/namespace.json"
_ENTITIES = "_sbqueue/entities"


def _doc_name(name: str) -> str:
    digest = hashlib.sha256(name_key(name).encode()).hexdigest()[:32]
    return f"{_ENTITIES}/{digest}.json"


class Catalog:
    """Reads and writes definitions; enforces uniqueness and the quotas of S1.5."""

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
            "created_at_utc": datetime.now(timezone.utc).isoformat(),
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

    def get_queue(self, name: str) -> QueueProperties:
        doc = self.documents.read(_doc_name(name))
        if doc is None or doc.get("kind") != "queue":
            raise MessagingEntityNotFoundError(f"queue {name!r} does not exist in {self.root}")
        return QueueProperties.from_json(doc["properties"])

    def queue_exists(self, name: str) -> bool:
        doc = self.documents.read(_doc_name(name))
        return doc is not None and doc.get("kind") == "queue"

    def list_docs(self) -> list[dict[str, Any]]:
        out = []
        for doc_name in self.documents.list(_ENTITIES):
            doc = self.documents.read(doc_name)
            if doc is not None:
                out.append(doc)
        return out

    def list_queues(self) -> list[QueueProperties]:
        queues = [
            QueueProperties.from_json(d["properties"]) for d in self.list_docs()
            if d.get("kind") == "queue"
        ]
        return sorted(queues, key=lambda q: name_key(q.name))

    def create_queue(self, props: QueueProperties) -> QueueProperties:
        """Store a new definition; one of two concurrent creators of a name wins."""
        with self.documents.lock("catalog"):
            if self.queue_exists(props.name) or self.documents.read(_doc_name(props.name)):
                raise MessagingEntityAlreadyExistsError(
                    f"an entity named {props.name!r} already exists in {self.root} "
                    "(names are case-insensitive, S1.7)"
                )
            docs = self.list_docs()
            if len(docs) >= MAX_ENTITIES:
                raise ServiceBusQuotaExceededError(
                    f"namespace {self.root} holds {len(docs)} entities; at most "
                    f"{MAX_ENTITIES} (S1.5)"
                )
            ns = self.namespace()
            if props.enable_partitioning and ns is not None and ns.sku is Sku.STANDARD:
                partitioned = sum(
                    1 for d in docs if d["properties"].get("enable_partitioning")
                    and d.get("kind") in ("queue", "topic")
                )
                if partitioned >= MAX_PARTITIONED_ENTITIES:
                    raise ServiceBusQuotaExceededError(
                        f"cannot create partitioned queue {props.name!r}: the namespace has "
                        f"{partitioned} partitioned queues and topics; at most "
                        f"{MAX_PARTITIONED_ENTITIES} on Standard (S1.5)"
                    )
            now = datetime.now(timezone.utc)
            props.entity_id = props.entity_id or uuid.uuid4().hex
            props.created_at_utc = props.updated_at_utc = now
            try:
                self.documents.create(
                    _doc_name(props.name), {"kind": "queue", "properties": props.to_json()}
                )
            except DocumentExists:
                raise MessagingEntityAlreadyExistsError(
                    f"an entity named {props.name!r} already exists in {self.root} (S1.7)"
                ) from None
        return props

    def replace_queue(self, props: QueueProperties) -> QueueProperties:
        props.updated_at_utc = datetime.now(timezone.utc)
        self.documents.replace(
            _doc_name(props.name), {"kind": "queue", "properties": props.to_json()}
        )
        return props

    def delete_queue(self, name: str) -> QueueProperties:
        props = self.get_queue(name)
        if not self.documents.delete(_doc_name(name)):
            raise MessagingEntityNotFoundError(f"queue {name!r} does not exist in {self.root}")
        return props
