"""``ServiceBusClient``: the entry point of the azure-servicebus-shaped client.

It opens a namespace (a folder or a URI Spark can write) and hands out senders and
receivers. Code written for azure-servicebus 7.x ports by changing the imports and the
connection string (docs/api/client.md).
"""

from __future__ import annotations

from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sbqueue.client.convert import utc
from sbqueue.client.enums import (
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
    as_receive_mode,
    as_sub_queue,
)
from sbqueue.client.receiver import ServiceBusReceiver
from sbqueue.client.sender import ServiceBusSender
from sbqueue.client.transaction import ServiceBusTransaction
from sbqueue.core.connection import parse_endpoint
from sbqueue.core.keywords import CLIENT_TRANSPORT, LINK, OPERATION, accept
from sbqueue.core.names import SUBSCRIPTIONS_SEGMENT
from sbqueue.core.subqueues import SubQueue
from sbqueue.engine.namespace import Namespace
from sbqueue.exceptions import InvalidOperationError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sbqueue.client.lock_renewer import AutoLockRenewer

__all__ = ["ServiceBusClient"]

class ServiceBusClient:
    """A namespace's senders and receivers. ``spark=None``: the active SparkSession, or a
    local one with Delta (``sbqueue.spark.get_session``)."""

    def __init__(self, namespace: str, spark: SparkSession | None = None,
                 **kwargs: Any) -> None:
        accept("ServiceBusClient", kwargs, CLIENT_TRANSPORT)
        self._root = namespace
        self._spark = spark
        self._namespace: Namespace | None = None

    @classmethod
    def from_connection_string(cls, conn_str: str, *, spark: SparkSession | None = None,
                               **kwargs: Any) -> ServiceBusClient:
        """``Endpoint=<folder or URI>``; the other keys of an Azure connection string
        (SharedAccessKeyName, ...) are accepted and ignored."""
        return cls(parse_endpoint(conn_str), spark=spark, **kwargs)

    @property
    def namespace(self) -> Namespace:
        """The namespace, opened (and Spark started) on first use."""
        if self._namespace is None:
            self._namespace = Namespace(self._root, self._spark)
        return self._namespace

    @property
    def fully_qualified_namespace(self) -> str:
        return self.namespace.root

    def get_queue_sender(self, queue_name: str, **kwargs: Any) -> ServiceBusSender:
        """A sender to ``queue_name``; MessagingEntityNotFound if it does not exist."""
        accept("get_queue_sender", kwargs, LINK)
        if SubQueue.split(queue_name)[1].is_dead_letter:
            raise InvalidOperationError(
                f"{queue_name}: nothing can be sent to a dead-letter queue (S7.2)")
        return ServiceBusSender(self.namespace.entity(queue_name))

    def get_topic_sender(self, topic_name: str, **kwargs: Any) -> ServiceBusSender:
        """A sender to ``topic_name``: each send fans out to the subscriptions whose rules
        match, in one commit (S15.2)."""
        accept("get_topic_sender", kwargs, LINK)
        return ServiceBusSender(self.namespace.topic(topic_name))

    def get_queue_receiver(
        self,
        queue_name: str,
        *,
        session_id: Any = None,
        sub_queue: ServiceBusSubQueue | str | None = None,
        receive_mode: ServiceBusReceiveMode | str = ServiceBusReceiveMode.PEEK_LOCK,
        max_wait_time: float | None = None,
        prefetch_count: int = 0,
        auto_lock_renewer: AutoLockRenewer | None = None,
        **kwargs: Any,
    ) -> ServiceBusReceiver:
        """A receiver of ``queue_name`` or one of its dead-letter sub-queues (S7.1); with
        ``session_id`` (an id or NEXT_AVAILABLE_SESSION) a session receiver (S10.2). With
        ``auto_lock_renewer``, each message received in peek-lock mode (or the session)
        is registered with it."""
        accept("get_queue_receiver", kwargs, LINK)
        return self._receiver(queue_name, f"queue {queue_name!r}", session_id, sub_queue,
                              receive_mode, max_wait_time, prefetch_count, auto_lock_renewer)

    def get_subscription_receiver(
        self,
        topic_name: str,
        subscription_name: str,
        *,
        session_id: Any = None,
        sub_queue: ServiceBusSubQueue | str | None = None,
        receive_mode: ServiceBusReceiveMode | str = ServiceBusReceiveMode.PEEK_LOCK,
        max_wait_time: float | None = None,
        prefetch_count: int = 0,
        auto_lock_renewer: AutoLockRenewer | None = None,
        **kwargs: Any,
    ) -> ServiceBusReceiver:
        """A receiver of a subscription, as ``get_queue_receiver`` of a queue."""
        accept("get_subscription_receiver", kwargs, LINK)
        path = f"{topic_name}/{SUBSCRIPTIONS_SEGMENT}/{subscription_name}"
        return self._receiver(path, f"subscription {path!r}", session_id, sub_queue,
                              receive_mode, max_wait_time, prefetch_count, auto_lock_renewer)

    def _receiver(self, path: str, what: str, session_id: Any,
                  sub_queue: ServiceBusSubQueue | str | None,
                  receive_mode: ServiceBusReceiveMode | str, max_wait_time: float | None,
                  prefetch_count: int, renewer: AutoLockRenewer | None
                  ) -> ServiceBusReceiver:
        chosen = as_sub_queue(sub_queue)
        entity = self.namespace.entity(
            SubQueue.from_sdk_name(chosen.value).path(path) if chosen else path)
        sessionful = entity.props.requires_session and not chosen
        if session_id is not None and not sessionful:
            raise InvalidOperationError(
                f"{entity.path} does not require sessions: open the receiver without "
                f"session_id (got {session_id!r}) (S10.2)")
        if sessionful and session_id is None:
            raise InvalidOperationError(
                f"{what} requires sessions: open a session receiver "
                "(session_id=... or NEXT_AVAILABLE_SESSION) (S10.2)")
        return ServiceBusReceiver(entity,
                                  receive_mode=as_receive_mode(receive_mode),
                                  max_wait_time=max_wait_time, prefetch_count=prefetch_count,
                                  session_id=session_id, auto_lock_renewer=renewer)

    def list_queue_sessions(self, queue_name: str, *,
                            state_updated_after: datetime | None = None,
                            **kwargs: Any) -> list[str]:
        """The ids of the queue's sessions that have messages or a state (S10.6); with
        ``state_updated_after``, those whose state was set after that time."""
        accept("list_queue_sessions", kwargs, OPERATION)
        return self.namespace.entity(queue_name).sessions.list_ids(utc(state_updated_after))

    def list_subscription_sessions(self, topic_name: str, subscription_name: str, *,
                                   state_updated_after: datetime | None = None,
                                   **kwargs: Any) -> list[str]:
        """As ``list_queue_sessions``, for a subscription (S10.6)."""
        accept("list_subscription_sessions", kwargs, OPERATION)
        path = f"{topic_name}/{SUBSCRIPTIONS_SEGMENT}/{subscription_name}"
        return self.namespace.entity(path).sessions.list_ids(utc(state_updated_after))

    def transaction(self) -> ServiceBusTransaction:
        """A transaction on one entity (S12): ``with client.transaction() as tx:`` commits
        its sends, settlements and session state at once on leaving the block."""
        return ServiceBusTransaction()

    def close(self) -> None:
        """Nothing to release: the SparkSession belongs to the application."""

    def __enter__(self) -> ServiceBusClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

