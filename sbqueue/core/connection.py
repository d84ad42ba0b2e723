"""Connection strings: the ``Endpoint`` names the namespace root (docs/api/client.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import parse_qsl

from sbqueue.core.clock import utcnow
from sbqueue.exceptions import InvalidOperationError, ServiceBusAuthenticationError

__all__ = ["ServiceBusConnectionStringProperties", "parse_connection_string", "parse_endpoint"]


@dataclass(frozen=True)
class ServiceBusConnectionStringProperties:
    """A connection string's parts, as the SDK names them. ``endpoint`` (and
    ``fully_qualified_namespace``) is the namespace root: a folder or a URI Spark can write;
    the keys are kept as given and never used (the storage's own credentials apply)."""

    endpoint: str
    fully_qualified_namespace: str
    entity_path: str | None = None
    shared_access_key_name: str | None = None
    shared_access_key: str | None = None
    shared_access_signature: str | None = None


def parse_connection_string(conn_str: str) -> ServiceBusConnectionStringProperties:
    """The parts of ``conn_str`` (``Endpoint=...;EntityPath=...;SharedAccessKeyName=...``);
    keys compare case-insensitively, as the SDK's do."""
    parts = parse_connection_string_parts(conn_str)
    endpoint = parse_endpoint(conn_str)
    return ServiceBusConnectionStringProperties(
        endpoint=endpoint, fully_qualified_namespace=endpoint,
        entity_path=parts.get("entitypath") or None,
        shared_access_key_name=parts.get("sharedaccesskeyname") or None,
        shared_access_key=parts.get("sharedaccesskey") or None,
        shared_access_signature=parts.get("sharedaccesssignature") or None)


def parse_endpoint(connection_string: str) -> str:
    """The ``Endpoint`` of a connection string; other keys (SharedAccessKeyName, ...) are
    accepted and ignored. An Azure ``sb://`` endpoint is refused: read as a folder it would
    silently create a local namespace named after the Azure one. A shared access signature
    that has expired, or that names no expiry, is refused as the service refuses it
    (``check_signature``), though the storage's own credentials are what sbqueue uses."""
    parts = parse_connection_string_parts(connection_string)
    check_signature(parts.get("sharedaccesssignature"))
    endpoint = parts.get("endpoint", "")
    if not endpoint:
        raise InvalidOperationError(
            f"connection string {connection_string[:60]!r} has no Endpoint=<folder or URI> "
            "(S1.1)")
    if endpoint.lower().startswith("sb://"):
        raise InvalidOperationError(
            f"Endpoint {endpoint!r} is an Azure Service Bus namespace; sbqueue needs a "
            "folder or a URI Spark can write (file:, abfss:, s3a:, gs:), e.g. "
            "Endpoint=file:///data/sb (S1.1)")
    return endpoint


def parse_connection_string_parts(conn_str: object) -> dict[str, str]:
    """``key=value`` parts by lower-cased key (a value may itself hold ``=``). A part
    without ``=`` or a key given twice (in any case) is refused, as azure-core refuses it:
    which of two Endpoints was meant cannot be told."""
    if not isinstance(conn_str, str):
        raise InvalidOperationError(
            f"a connection string is a str, not {type(conn_str).__name__} {conn_str!r:.60} "
            "(S1.1)")
    parts: dict[str, str] = {}
    for part in conn_str.split(";"):
        key, equals, value = part.partition("=")
        key = key.strip().lower()
        if not key and not value.strip():
            continue  # an empty part: a trailing or doubled ';'
        if not key or not equals:
            raise InvalidOperationError(
                f"connection string part {part[:40]!r} is not key=value (S1.1)")
        if key in parts:
            raise InvalidOperationError(
                f"connection string gives {key!r} twice; keys ignore case (S1.1)")
        parts[key] = value.strip()
    return parts


def check_signature(signature: str | None, now: datetime | None = None) -> None:
    """A ``SharedAccessSignature`` (``SharedAccessSignature sr=...&sig=...&se=<epoch>``)
    must name its expiry (``se``, ASCII digits) and not be past it:
    ServiceBusAuthenticationError, as the service answers an expired token. No signature:
    nothing to check. An expiry past the year 9999 has not come."""
    if not signature:
        return
    fields = dict(parse_qsl(signature.removeprefix("SharedAccessSignature").strip()))
    expiry = fields.get("se", "")
    if not (expiry.isascii() and expiry.isdigit()):
        raise ServiceBusAuthenticationError(
            f"SharedAccessSignature {signature[:40]!r}... names no expiry (se=<seconds since "
            "1970>) (S1.1)")
    try:  # leading zeros off: int() takes at most 4300 digits
        ends = datetime.fromtimestamp(int(expiry.lstrip("0") or "0"), timezone.utc)
    except (OverflowError, OSError, ValueError):  # beyond datetime, or int()'s digit limit
        return
    if ends <= (now or utcnow()):
        raise ServiceBusAuthenticationError(
            f"the SharedAccessSignature expired at {ends.isoformat()} (se={expiry}) (S1.1)")
