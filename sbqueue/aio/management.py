"""The asyncio administration client (``azure.servicebus.aio.management``).

Every method of ``sbqueue.management.ServiceBusAdministrationClient`` is here a coroutine
with the same arguments and result, run in the asyncio client's worker pool: catalog
commits and table creation never block the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from sbqueue.aio._client import AsyncClosing, run_blocking
from sbqueue.management import ServiceBusAdministrationClient as SyncAdmin

__all__ = ["ServiceBusAdministrationClient"]


class ServiceBusAdministrationClient(AsyncClosing):
    """``await admin.create_queue("orders")``: the synchronous client's methods, awaited."""

    def __init__(self, namespace: str, spark: Any = None) -> None:
        self._sync = SyncAdmin(namespace, spark=spark)

    @classmethod
    def from_connection_string(cls, conn_str: str, **kwargs: Any
                               ) -> ServiceBusAdministrationClient:
        made = cls.__new__(cls)
        made._sync = SyncAdmin.from_connection_string(conn_str, **kwargs)
        return made

    def __getattr__(self, name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
        method = getattr(self._sync, name)
        if name.startswith("_") or not callable(method):
            raise AttributeError(name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await run_blocking(method, *args, **kwargs)
        call.__name__ = name
        call.__doc__ = method.__doc__
        return call

