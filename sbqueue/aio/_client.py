"""The asyncio client: ``sbqueue.client`` with awaitable operations (issue 20 point 5).

Every operation of sbqueue is a few reads and one commit made by blocking code (delta-rs,
the local log, or a Spark job). The asyncio shape runs each call of the synchronous client
in a worker thread of one shared pool, so the event loop never blocks on a commit; many
awaiting tasks are many threads of one process, and those threads already share commits
(the group commit of receives and completes, decision 011). The objects and their rules are
the synchronous client's: these classes only change how a call is waited for.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

from sbqueue.client import ServiceBusClient as SyncClient
from sbqueue.client import ServiceBusMessageBatch, ServiceBusReceivedMessage
from sbqueue.client.lock_renewer import AutoLockRenewer as SyncRenewer
from sbqueue.client.receiver import ServiceBusReceiver as SyncReceiver
from sbqueue.client.sender import SendInput
from sbqueue.client.sender import ServiceBusSender as SyncSender
from sbqueue.client.session import ServiceBusSession as SyncSession
from sbqueue.core.connection import parse_endpoint

__all__ = ["AsyncClosing", "AutoLockRenewer", "ServiceBusClient", "ServiceBusReceiver",
           "ServiceBusSender", "ServiceBusSession", "run_blocking"]

T = TypeVar("T")
# Enough threads for many tasks to wait on commits at once; the commits they share are
# what bounds the work, not this number.
_POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="sbqueue-aio")


async def run_blocking(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` in the shared worker pool, awaited."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_POOL, functools.partial(call, *args, **kwargs))


C = TypeVar("C", bound="AsyncClosing")


class AsyncClosing:
    """``async with``: ``_open`` on entering (nothing by default), ``close`` on leaving."""

    async def _open(self) -> None:
        """What entering does before the block runs (off the event loop when it blocks)."""

    async def close(self) -> None:
        """Release what the object holds."""

    async def __aenter__(self: C) -> C:
        await self._open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()


class ServiceBusSession:
    """A locked session (``receiver.session``), with awaitable state and lock renewal."""

    def __init__(self, sync: SyncSession) -> None:
        self._sync = sync

    @property
    def session_id(self) -> str:
        return self._sync.session_id

    @property
    def locked_until_utc(self) -> datetime:
        return self._sync.locked_until_utc

    async def get_state(self, **kwargs: Any) -> bytes | None:
        return await run_blocking(self._sync.get_state, **kwargs)

    async def set_state(self, state: bytes | str | None, **kwargs: Any) -> None:
        await run_blocking(self._sync.set_state, state, **kwargs)

    async def renew_lock(self, **kwargs: Any) -> datetime:
        return await run_blocking(self._sync.renew_lock, **kwargs)


class ServiceBusSender(AsyncClosing):
    """Sends to one queue or topic; each send is awaited until its commit landed."""

    def __init__(self, sync: SyncSender) -> None:
        self._sync = sync
        self.entity_name = sync.entity_name

    async def create_message_batch(self, max_size_in_bytes: int | None = None
                                   ) -> ServiceBusMessageBatch:
        return self._sync.create_message_batch(max_size_in_bytes)

    async def send_messages(self, message: SendInput, **kwargs: Any) -> None:
        await run_blocking(self._sync.send_messages, message, **kwargs)

    async def schedule_messages(self, messages: Any, schedule_time_utc: datetime,
                                **kwargs: Any) -> list[int]:
        return await run_blocking(self._sync.schedule_messages, messages, schedule_time_utc,
                                  **kwargs)

    async def cancel_scheduled_messages(self, sequence_numbers: int | Sequence[int],
                                        **kwargs: Any) -> None:
        await run_blocking(self._sync.cancel_scheduled_messages, sequence_numbers, **kwargs)

    async def close(self) -> None:
        self._sync.close()



class ServiceBusReceiver(AsyncClosing):
    """Receives from one queue, subscription or sub-queue: awaitable receives and
    settlements, ``async for`` over its messages (until ``max_wait_time`` idle)."""

    def __init__(self, sync: SyncReceiver) -> None:
        self._sync = sync
        self.entity_path = sync.entity_path
        self.receive_mode = sync.receive_mode
        self._session: ServiceBusSession | None = None

    @property
    def session(self) -> ServiceBusSession | None:
        """The session held (locked when the receiver was opened with ``async with``)."""
        sync = self._sync.session
        if sync is None:
            return None
        if self._session is None:
            self._session = ServiceBusSession(sync)
        return self._session

    async def _open(self) -> None:
        await run_blocking(lambda: self._sync.session)  # lock a session off the loop

    async def receive_messages(self, max_message_count: int | None = 1,
                               max_wait_time: float | None = None
                               ) -> list[ServiceBusReceivedMessage]:
        return await run_blocking(self._sync.receive_messages, max_message_count,
                                  max_wait_time)

    def __aiter__(self) -> AsyncIterator[ServiceBusReceivedMessage]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[ServiceBusReceivedMessage]:
        iterator = iter(self._sync)
        done = object()
        while (message := await run_blocking(next, iterator, done)) is not done:
            yield message

    async def peek_messages(self, max_message_count: int = 1, **kwargs: Any
                            ) -> list[ServiceBusReceivedMessage]:
        return await run_blocking(self._sync.peek_messages, max_message_count, **kwargs)

    async def complete_message(self, message: ServiceBusReceivedMessage) -> None:
        await run_blocking(self._sync.complete_message, message)

    async def abandon_message(self, message: ServiceBusReceivedMessage) -> None:
        await run_blocking(self._sync.abandon_message, message)

    async def defer_message(self, message: ServiceBusReceivedMessage) -> None:
        await run_blocking(self._sync.defer_message, message)

    async def dead_letter_message(self, message: ServiceBusReceivedMessage,
                                  reason: str | None = None,
                                  error_description: str | None = None) -> None:
        await run_blocking(self._sync.dead_letter_message, message, reason, error_description)

    async def renew_message_lock(self, message: ServiceBusReceivedMessage,
                                 **kwargs: Any) -> datetime:
        return await run_blocking(self._sync.renew_message_lock, message, **kwargs)

    async def receive_deferred_messages(self, sequence_numbers: int | Sequence[int],
                                        **kwargs: Any) -> list[ServiceBusReceivedMessage]:
        return await run_blocking(self._sync.receive_deferred_messages, sequence_numbers,
                                  **kwargs)

    async def delete_messages(self, **kwargs: Any) -> int:
        return await run_blocking(self._sync.delete_messages, **kwargs)

    async def purge_messages(self, **kwargs: Any) -> int:
        return await run_blocking(self._sync.purge_messages, **kwargs)

    async def close(self) -> None:
        await run_blocking(self._sync.close)



class AutoLockRenewer(AsyncClosing):
    """Keeps locks alive from a background thread, as the synchronous one; ``register`` is
    immediate, ``close`` awaitable (the SDK's asyncio shape)."""

    def __init__(self, max_lock_renewal_duration: float = 300,
                 on_lock_renew_failure: Callable[[Any, Exception | None], Any] | None = None,
                 **kwargs: Any) -> None:
        self._sync = SyncRenewer(max_lock_renewal_duration, on_lock_renew_failure, **kwargs)

    @property
    def sync(self) -> SyncRenewer:
        return self._sync

    def register(self, receiver: ServiceBusReceiver,
                 renewable: ServiceBusReceivedMessage | ServiceBusSession,
                 max_lock_renewal_duration: float | None = None,
                 on_lock_renew_failure: Callable[[Any, Exception | None], Any] | None = None
                 ) -> None:
        target = renewable._sync if isinstance(renewable, ServiceBusSession) else renewable
        self._sync.register(receiver._sync, target, max_lock_renewal_duration,
                            on_lock_renew_failure)

    async def close(self) -> None:
        await run_blocking(self._sync.close)



class ServiceBusClient(AsyncClosing):
    """The namespace's senders and receivers, asyncio-shaped (``async with``)."""

    def __init__(self, namespace: str, spark: Any = None, **kwargs: Any) -> None:
        self._sync = SyncClient(namespace, spark=spark, **kwargs)

    @classmethod
    def from_connection_string(cls, conn_str: str, *, spark: Any = None,
                               **kwargs: Any) -> ServiceBusClient:
        return cls(parse_endpoint(conn_str), spark=spark, **kwargs)

    @property
    def fully_qualified_namespace(self) -> str:
        return self._sync.fully_qualified_namespace

    def get_queue_sender(self, queue_name: str, **kwargs: Any) -> ServiceBusSender:
        return ServiceBusSender(self._sync.get_queue_sender(queue_name, **kwargs))

    def get_topic_sender(self, topic_name: str, **kwargs: Any) -> ServiceBusSender:
        return ServiceBusSender(self._sync.get_topic_sender(topic_name, **kwargs))

    def get_queue_receiver(self, queue_name: str, **kwargs: Any) -> ServiceBusReceiver:
        return ServiceBusReceiver(self._sync.get_queue_receiver(
            queue_name, **_renewer_of(kwargs)))

    def get_subscription_receiver(self, topic_name: str, subscription_name: str,
                                  **kwargs: Any) -> ServiceBusReceiver:
        return ServiceBusReceiver(self._sync.get_subscription_receiver(
            topic_name, subscription_name, **_renewer_of(kwargs)))

    async def list_queue_sessions(self, queue_name: str, **kwargs: Any) -> list[str]:
        return await run_blocking(self._sync.list_queue_sessions, queue_name, **kwargs)

    async def list_subscription_sessions(self, topic_name: str, subscription_name: str,
                                         **kwargs: Any) -> list[str]:
        return await run_blocking(self._sync.list_subscription_sessions, topic_name,
                                  subscription_name, **kwargs)

    async def close(self) -> None:
        self._sync.close()

    async def _open(self) -> None:
        await run_blocking(lambda: self._sync.namespace)  # open it (and Spark) off the loop


def _renewer_of(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The receiver keywords, an asyncio ``AutoLockRenewer`` given as its thread's."""
    renewer = kwargs.get("auto_lock_renewer")
    if isinstance(renewer, AutoLockRenewer):
        kwargs = {**kwargs, "auto_lock_renewer": renewer.sync}
    return kwargs
