"""Keyword arguments as strict as azure-servicebus's (issue 20).

A ported program passes the SDK's keywords. Those with a meaning here are parameters of the
method itself; those about the AMQP or HTTP transport (``logging_enable``, ``retry_total``,
``uamqp_transport``, ...) have none on a storage-backed engine and are accepted and
ignored, each set named below and listed in the API docs. Anything else is refused with
``TypeError`` naming it, as Python refuses a misspelt keyword: ``max_wiat_time=5`` must not
give a receiver that waits forever.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sbqueue.store import deadline

__all__ = ["ADMIN_CALL", "CLIENT_TRANSPORT", "LINK", "OPERATION", "accept", "honours_timeout"]

F = TypeVar("F", bound=Callable[..., Any])

# ServiceBusClient(...) and from_connection_string: the AMQP connection's settings.
CLIENT_TRANSPORT = frozenset({
    "logging_enable", "transport_type", "http_proxy", "user_agent", "retry_total",
    "retry_backoff_factor", "retry_backoff_max", "retry_mode", "custom_endpoint_address",
    "connection_verify", "ssl_context", "uamqp_transport", "credential"})
# get_*_sender / get_*_receiver: one AMQP link's settings.
LINK = frozenset({"client_identifier", "socket_timeout"})
# Operations of senders, receivers and sessions: the SDK's total operation timeout, enforced
# at each commit (``honours_timeout``).
OPERATION = frozenset({"timeout"})
# Administration calls: the management API version and the HTTP pipeline's options.
ADMIN_CALL = frozenset({
    "api_version", "logging_enable", "headers", "timeout", "connection_timeout",
    "read_timeout", "retry_total", "user_agent"})


def accept(where: str, given: Mapping[str, object], ignored: frozenset[str]) -> None:
    """Refuse every keyword in ``given`` that is not in ``ignored`` (the SDK's keywords
    without a meaning here), naming it and ``where`` it was passed."""
    unknown = sorted(set(given) - ignored)
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise TypeError(
            f"{where}() got unexpected keyword argument{'s' if len(unknown) > 1 else ''} "
            f"{names} (it accepts and ignores only {', '.join(sorted(ignored)) or 'none'})")


def honours_timeout(method: F) -> F:
    """Run ``method`` under its caller's ``timeout=`` keyword (seconds): past it at a commit,
    ``OperationTimeoutError`` and nothing committed (``store.deadline``)."""
    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        with deadline.within(kwargs.get("timeout"), method.__name__):
            return method(*args, **kwargs)
    return run  # type: ignore[return-value]
