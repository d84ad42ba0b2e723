"""A namespace: one storage root plus one Spark catalog database (SPEC S1.1).

``Namespace`` is the Spark-native entry point: it opens (or creates) the namespace,
hands out ``Entity`` objects by path, and keeps one Spark SQL view per queue in the
namespace's database so that every entity is queryable by name (``sql_name``).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sbqueue.core.duplicates import dedupe_window
from sbqueue.core.lifecycle import DELETING
from sbqueue.core.names import (
    SUBSCRIPTIONS_SEGMENT,
    subscription_parts,
    validate_entity_path,
)
from sbqueue.core.properties import EntityDefinition, NamespaceProperties, Sku
from sbqueue.core.subqueues import SubQueue
from sbqueue.engine.catalog import Catalog
from sbqueue.engine.entity import Entity
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.reads.view import messages_sql
from sbqueue.engine.storage_guard import definition_guarded
from sbqueue.engine.topics.topic import Topic
from sbqueue.exceptions import (
    InvalidOperationError,
    MessagingEntityAlreadyExistsError,
    MessagingEntityNotFoundError,
    ServiceBusConnectionError,
    StorageConflictError,
)
from sbqueue.location import driver_uri, is_local, is_object_store, is_s3, local_path
from sbqueue.spark.lazy import started
from sbqueue.spark.s3a import aws_env_of
from sbqueue.spark.session import is_connect
from sbqueue.store.aws import complete as complete_aws
from sbqueue.store.delta import creates_here
from sbqueue.store.documents import open_document_store
from sbqueue.store.executor import Executor, opened

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Namespace", "normalize_root", "settle_aws"]

D = TypeVar("D", bound=EntityDefinition)

_TABLES = {"queue": ("inbox", "ledger"), "topic": ("inbox",), "subscription": ("ledger",)}


def normalize_root(root: str) -> str:
    """An absolute local path, or the URI as given for object stores; a local path that is
    a file (or under one) is refused."""
    if is_object_store(root):
        return driver_uri(root)  # s3a:// and s3:// name one table
    if not is_local(root):
        return root.rstrip("/")
    path = local_path(root)
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                raise InvalidOperationError(
                    f"namespace {root!r}: {folder} is a file, not a folder (S1.1)")
            break
    return str(path)


def settle_aws(root: str, spark: SparkSession | None) -> None:
    """For an S3 ``root``: the AWS variables that the session's S3A confs or a named profile
    give, added where the environment lacks them (``store.aws``), before any client is
    made, so the driver and a JVM started later reach the store Spark does."""
    if is_s3(root):
        complete_aws(aws_env_of(spark) if spark is not None and started(spark) else {})


def _open_catalog(root: str, spark: SparkSession) -> Catalog:
    """The catalog at ``root``; a storage scheme Spark cannot reach, or an S3 bucket the
    AWS environment does not reach, is one clear error."""
    try:
        return Catalog(open_document_store(root, spark), root)
    except Exception as exc:
        text = str(exc)
        missing = ("No FileSystem for scheme" in text or "UnsupportedFileSystem" in text
                   or ("ClassNotFoundException" in text and "FileSystem" in text))
        if missing:
            scheme = root.split(":", 1)[0]
            raise ServiceBusConnectionError(
                f"namespace {root!r}: this Spark session has no file system for {scheme}: "
                "add its Hadoop connector and credentials (README, 'On a cluster and on cloud "
                "storage') (S1.1)") from None
        raise


def _sql_identifier(text: str) -> str:
    clean = re.sub(r"[^0-9a-zA-Z_]", "_", text).lower().strip("_") or "x"
    if clean != text.lower():
        clean = f"{clean}_{hashlib.sha256(text.lower().encode()).hexdigest()[:6]}"
    return clean


class Namespace:
    """Opens the namespace at ``root`` (creating it as Standard on first use)."""

    def __init__(
        self,
        root: str,
        spark: SparkSession | None = None,
        *,
        sku: str | Sku | None = None,
        messaging_partitions: int | None = None,
    ) -> None:
        self.root = normalize_root(root)
        if spark is None:
            from sbqueue.spark.lazy import when_needed

            spark = when_needed(self.root)  # no JVM until a step needs Spark (issue 45)
        self.spark = spark
        settle_aws(self.root, spark)
        # local or spark, chosen once before anything is read (``store.executor``)
        self.executor: Executor = opened(self.root, is_connect(spark))
        self.catalog = _open_catalog(self.root, spark)
        existing = self.catalog.namespace()
        if existing is None:
            chosen, count = NamespaceProperties.validate(sku or Sku.STANDARD,
                                                         messaging_partitions)
            existing = self.catalog.create_namespace(chosen, count)
        elif sku is not None or messaging_partitions is not None:
            chosen, count = NamespaceProperties.validate(sku or existing.sku,
                                                         messaging_partitions)
            if (chosen, count) != (existing.sku, existing.messaging_partitions):
                raise InvalidOperationError(
                    f"namespace {self.root} is {existing.sku.value} with "
                    f"{existing.messaging_partitions} partition(s); a namespace's SKU and "
                    "partitions are fixed at creation (S1.2)"
                )
        self.properties = existing
        self.database = f"sbq_{_sql_identifier(self.root.rsplit('/', 1)[-1])}_" + \
            hashlib.sha256(self.root.encode()).hexdigest()[:8]
        self._views_ready = False

    @classmethod
    def without_spark(cls, root: str, where: str) -> Namespace:
        """The existing namespace at ``root`` (a local folder or an S3 prefix, which the
        local executor serves), opened in a process with no Spark (a Python data source's
        worker): only the engine's driver paths work; anything else raises
        ``SparkSetupError`` naming ``where`` (``spark.absent``)."""
        from sbqueue.spark.absent import NoSpark

        if not (is_local(root) or is_object_store(root)):
            raise InvalidOperationError(
                f"{where}: namespace {root!r} is neither a local folder nor S3; the sbqueue "
                "data source reads and writes local (or mounted) folders and S3 prefixes "
                "only: use the DataFrame API in foreachBatch on other stores (decision 024)")
        return cls.existing(root, cast("SparkSession", NoSpark(where)))

    @classmethod
    def existing(cls, root: str, spark: SparkSession) -> Namespace:
        """The namespace at ``root``, which must exist (jobs never create one by a typo)."""
        if _open_catalog(normalize_root(root), spark).namespace() is None:
            raise MessagingEntityNotFoundError(
                f"no namespace at {root!r}: create one first (sbqueue queue create ..., or "
                "sbqueue demo) (S1.1)")
        return cls(root, spark)

    # -- entities --------------------------------------------------------------------------
    def entity(self, path: str) -> Entity:
        """The entity at ``path``: a queue, a subscription (``<topic>/Subscriptions/<name>``),
        or one of their sub-queues (``<path>/$DeadLetterQueue`` and the like)."""
        base, sub_queue = SubQueue.split(path)
        validate_entity_path(base, "entity path")
        parts = subscription_parts(base)
        if parts is not None and self.catalog.exists("topic", parts[0]):
            return Entity(self, self.catalog.get("subscription", parts[1], parts[0]), sub_queue)
        if self.catalog.exists("topic", base) and not self.catalog.queue_exists(base):
            raise InvalidOperationError(
                f"{base!r} is a topic: send to it with topic_sender / Topic, receive from "
                f"its subscriptions ('{base}/{SUBSCRIPTIONS_SEGMENT}/<name>') (S15.2)")
        return Entity(self, self.catalog.get_queue(base), sub_queue)

    def topic(self, name: str) -> Topic:
        """The topic ``name``, for sends that fan out to its subscriptions (S15.2)."""
        return Topic(self, self.catalog.get("topic", validate_entity_path(name, "topic name")))

    def sendable(self, name: str) -> Entity | Topic:
        """What a send to ``name`` goes through: the queue, or the topic (S15.2)."""
        if self.catalog.exists("topic", name) and not self.catalog.queue_exists(name):
            return self.topic(name)
        return self.entity(name)

    def create_storage(self, kind: str, props: D, extra: dict[str, Any] | None = None) -> D:
        """Publish a new entity: its definition (marked creating), then its tables, then the
        definition marked ready. A crash in between leaves a creating definition that the
        next create or delete of the name finishes (decision 020).

        A queue has an inbox and a ledger, a topic an inbox (its sends), a subscription a
        ledger (its copies); docs/decisions/001-storage-layout.md.
        """
        with definition_guarded(f"{kind} {props.name!r}", "the create"):
            return self._create_storage(kind, props, extra)

    def _create_storage(self, kind: str, props: D, extra: dict[str, Any] | None) -> D:
        topic = getattr(props, "topic_name", None) if kind == "subscription" else None
        props.entity_id = ""
        for _ in range(3):  # a name left deleting by another caller is finished, then used
            self.settle(kind, props.name, topic)
            try:
                created = self.catalog.create(kind, props, extra)
                break
            except MessagingEntityAlreadyExistsError:
                if self.catalog.pending(kind, props.name, topic) is None:
                    raise
        else:
            raise StorageConflictError(
                f"{kind} {props.name!r}: its name kept being deleted and created by others; "
                "nothing was created: try again")
        try:
            if topic is not None:  # its topic's delete lists subscriptions after marking
                self.catalog.get("topic", topic)
            self._make_tables(kind, created.entity_id)
        except BaseException:
            if self.catalog.forget(kind, created.name, topic, created.entity_id):
                self._remove_data(created.entity_id)
            raise
        return self._publish(kind, created)

    def _publish(self, kind: str, props: D) -> D:
        """Mark a creating entity ready, and give it its view where this session's views
        are registered (else ``sql_name`` registers them all when first asked: a create
        starts no Spark statement, and works where Spark cannot reach the store); its data
        goes if it was deleted meanwhile (no definition can name that id again)."""
        try:
            self.catalog.publish(kind, props)
        except MessagingEntityNotFoundError:
            self._remove_data(props.entity_id)
            raise
        if "ledger" in _TABLES[kind] and self._views_ready:
            self._register_view(kind, props)
        return props

    def _make_tables(self, kind: str, entity_id: str) -> None:
        """Create the entity's tables unless they exist (so finishing is idempotent)."""
        tables = _TABLES[kind]
        here = creates_here(self.spark, self.catalog.data_path(entity_id, tables[0]))
        if "inbox" in tables:
            Inbox(self.spark, self.catalog.data_path(entity_id, "inbox")).create_empty(here)
        if "ledger" in tables:
            Ledger(self.spark, self.catalog.data_path(entity_id, "ledger")).create_empty(here)

    def settle(self, kind: str, name: str, topic: str | None = None) -> None:
        """Finish what a crashed (or concurrent) create or delete of this name left: make a
        creating entity's tables and mark it ready, or drop a deleting one's and remove it."""
        found = self.catalog.pending(kind, name, topic)
        if found is None:
            return
        state, props = found
        if state == DELETING:
            self._drop(kind, props)
            return
        self._make_tables(kind, props.entity_id)
        with contextlib.suppress(MessagingEntityNotFoundError):  # deleted meanwhile
            self._publish(kind, props)

    def delete_storage(self, kind: str, name: str, topic: str | None = None) -> None:
        """Delete an entity: mark its definition deleting (it is gone from then on), drop
        its view and tables (a topic's subscriptions first), remove the definition. A
        delete that finds it deleting already finishes that one and reports it absent."""
        with definition_guarded(f"{kind} {name!r}", "the delete"):
            props, marked = self.catalog.mark_deleting(kind, name, topic)
            self._drop(kind, props)
        if not marked:
            raise MessagingEntityNotFoundError(
                f"{kind} {name!r} does not exist in {self.root} (it was being deleted)")

    def _drop(self, kind: str, props: EntityDefinition) -> None:
        topic = getattr(props, "topic_name", None) if kind == "subscription" else None
        if kind == "topic":  # those in any state: none may outlive its topic
            for sub in self.catalog.entities("subscription", topic=props.name, every=True):
                with contextlib.suppress(MessagingEntityNotFoundError):
                    self.delete_storage("subscription", sub.name, props.name)
        if "ledger" in _TABLES[kind] and started(self.spark):  # no session: no view to drop
            self.spark.sql(f"DROP VIEW IF EXISTS {self._qualified(self._view_name(kind, props))}")
        self._remove_data(props.entity_id)
        self.catalog.forget(kind, props.name, topic, props.entity_id)

    @staticmethod
    def _view_name(kind: str, props: EntityDefinition) -> str:
        if kind == "subscription":
            return f"{props.topic_name}/{SUBSCRIPTIONS_SEGMENT}/{props.name}"  # type: ignore[attr-defined]
        return props.name

    def _remove_data(self, entity_id: str) -> None:
        """Remove an entity's folder. On object stores there is no public Spark call that
        deletes a folder, so the data stays until maintenance removes folders that no
        definition names (ids are never reused, so nothing can see it again)."""
        if is_local(self.root):
            shutil.rmtree(f"{local_path(self.root)}/entities/{entity_id}", ignore_errors=True)

    # -- Spark SQL -------------------------------------------------------------------------
    def sql_name(self, name: str) -> str:
        """The Spark SQL name of an entity's view: ``<database>.<entity>``. Characters
        outside ``[A-Za-z0-9_]`` (such as the ``/`` of ``topic/Subscriptions/sub``) become
        ``_``, followed by a short hash of the name."""
        if not self._views_ready:  # a new session: its catalog has no views yet
            self.register_views()
        return self._qualified(name)

    def _qualified(self, name: str) -> str:
        return f"{self.database}.{_sql_identifier(name)}"

    def _register_view(self, kind: str, props: EntityDefinition) -> None:
        """The entity's messages as a view (``reads.view.messages_sql``); a subscription reads
        its topic's inbox through its own ledger."""
        owner = props
        if kind == "subscription":
            owner = self.catalog.get("topic", props.topic_name)  # type: ignore[attr-defined]
        inbox = Inbox(self.spark, self.catalog.data_path(owner.entity_id, "inbox"))
        ledger = Ledger(self.spark, self.catalog.data_path(props.entity_id, "ledger"))
        self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {self.database}")
        target = props.entity_id if kind == "subscription" else None
        select = messages_sql(inbox, ledger, dedupe=dedupe_window(owner), target=target)
        self.spark.sql(f"CREATE OR REPLACE VIEW {self._qualified(self._view_name(kind, props))} "
                       f"AS {select}")

    def register_views(self) -> None:
        """(Re)create the view of every queue and subscription in this session's catalog."""
        for kind in ("queue", "subscription"):
            for props in self.catalog.entities(kind):
                self._register_view(kind, props)
        self._views_ready = True
