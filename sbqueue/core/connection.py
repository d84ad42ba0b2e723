"""Connection strings: the ``Endpoint`` names the namespace root (docs/api/client.md)."""

from __future__ import annotations

from sbqueue.exceptions import InvalidOperationError

__all__ = ["parse_endpoint"]


def parse_endpoint(connection_string: str) -> str:
    """The ``Endpoint`` of a connection string; other keys (SharedAccessKeyName, ...) are
    accepted and ignored. An Azure ``sb://`` endpoint is refused: read as a folder it would
    silently create a local namespace named after the Azure one."""
    for part in connection_string.split(";"):
        key, _, value = part.partition("=")
        if key.strip().lower() == "endpoint" and value.strip():
            endpoint = value.strip()
            if endpoint.lower().startswith("sb://"):
                raise InvalidOperationError(
                    f"Endpoint {endpoint!r} is an Azure Service Bus namespace; sbqueue needs a "
                    "folder or a URI Spark can write (file:, abfss:, s3a:, gs:), e.g. "
                    "Endpoint=file:///data/sb")
            return endpoint
    raise InvalidOperationError(
        f"connection string {connection_string[:60]!r} has no Endpoint=<folder or URI>"
    )
