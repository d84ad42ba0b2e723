"""A namespace: one storage root plus one Spark catalog database (SPEC S1.1).

``Namespace`` is the Spark-native entry point: it opens (or creates) the namespace,
hands out ``Entity`` objects by path, and keeps one Spark SQL view per queue in the
namespace's database so that every entity is queryable by name (``sql_name``).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import uuid
from typing import TYPE_CHECKING, Any

from sbqueue.core.names import (
    DEAD_LETTER_SUFFIX,
    TRANSFER_DEAD_LETTER_SUFFIX,
    validate_entity_path,
)
from sbqueue.core.properties import NamespaceProperties, QueueProperties, Sku
from sbqueue.engine.catalog import Catalog
from sbqueue.engine.entity import Entity, SubQueue
from sbqueue.exceptions import InvalidOperationError
from sbqueue.store.documents import is_local, local_path, open_document_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Namespace", "normalize_root"]


def normalize_root(root: str) -> str:
    """An absolute local path, or the URI as given for object stores."""
    return str(local_path(root)) if is_local(root) else root.rstrip("/")


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
        if spark is None:
            from sbqueue.spark import get_session

            spark = get_session()
        self.spark = spark
        self.root = normalize_root(root)
        self.catalog = Catalog(open_document_store(self.root, spark), self.root)
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

    # -- entities --------------------------------------------------------------------------
    def entity(self, path: str) -> Entity:
        """The entity at ``path``: a queue, or ``<queue>/$DeadLetterQueue`` and the like."""
        sub_queue = SubQueue.MAIN
        base = path
        for suffix, sub in ((TRANSFER_DEAD_LETTER_SUFFIX, SubQueue.TRANSFER_DEAD_LETTER),
                            (DEAD_LETTER_SUFFIX, SubQueue.DEAD_LETTER)):
            if path.endswith("/" + suffix):
                base, sub_queue = path[: -len(suffix) - 1], sub
                break
        validate_entity_path(base, "entity path")
        return Entity(self, self.catalog.get_queue(base), sub_queue)

    def create_queue_storage(self, props: QueueProperties) -> QueueProperties:
        """Create the tables of a new queue, then publish its definition (or clean up)."""
        props.entity_id = uuid.uuid4().hex
        entity = Entity(self, props)
        try:
            entity.create_tables()
            created = self.catalog.create_queue(props)
        except BaseException:
            self._remove_data(props.entity_id)
            raise
        self._register_view(created)
        return created

    def delete_queue_storage(self, name: str) -> None:
        props = self.catalog.delete_queue(name)
        self.spark.sql(f"DROP VIEW IF EXISTS {self.sql_name(props.name)}")
        self._remove_data(props.entity_id)

    def _remove_data(self, entity_id: str) -> None:
        folder = f"{self.root}/entities/{entity_id}"
        if is_local(self.root):
            shutil.rmtree(folder, ignore_errors=True)
        else:
            jvm: Any = self.spark._jvm
            jsc: Any = self.spark._jsc
            path = jvm.org.apache.hadoop.fs.Path(folder)
            path.getFileSystem(jsc.hadoopConfiguration()).delete(path, True)

    # -- Spark SQL -------------------------------------------------------------------------
    def sql_name(self, name: str) -> str:
        """The Spark SQL name of a queue's view: ``<database>.<queue>``; ``/`` and other
        characters outside ``[A-Za-z0-9_]`` become ``_`` followed by a short hash."""
        return f"{self.database}.{_sql_identifier(name)}"

    def _register_view(self, props: QueueProperties) -> None:
        self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {self.database}")
        ledger = self.catalog.data_path(props.entity_id, "ledger")
        self.spark.sql(
            f"CREATE OR REPLACE VIEW {self.sql_name(props.name)} AS "
            "SELECT sequence_number, partition_id, message_id, session_id, partition_key, "
            "correlation_id, subject, content_type, `to`, reply_to, reply_to_session_id, "
            "application_properties, body, size_in_bytes, enqueued_time_utc, "
            "enqueued_sequence_number, scheduled_enqueue_time_utc, expires_at_utc, state, "
            "CASE sub_queue WHEN 'dlq' THEN 'DeadLetter' WHEN 'tdlq' THEN 'TransferDeadLetter' "
            "ELSE 'Main' END AS sub_queue, delivery_count, lock_token, locked_until_utc, "
            "dead_letter_reason, dead_letter_error_description, dead_letter_source "
            f"FROM delta.`{ledger}` WHERE row_type = 'm'"
        )

    def register_views(self) -> None:
        """(Re)create the view of every queue in this session's catalog."""
        for props in self.catalog.list_queues():
            self._register_view(props)
        self._views_ready = True
