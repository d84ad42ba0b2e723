"""Application property values (SPEC S2.3): allowed types and a type-keeping encoding.

Values are stored as strings tagged with their type (``i:42``, ``s:text``) in a Delta
``map<string,string>``, so an int comes back an int and a rule filter (a later issue) can
still compare them in Spark SQL without parsing JSON.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from sbqueue.core.durations import format_duration, parse_duration
from sbqueue.exceptions import InvalidOperationError

__all__ = ["decode_properties", "decode_value", "encode_properties", "encode_value"]

_INT64 = (-(1 << 63), (1 << 63) - 1)


def encode_value(name: str, value: Any) -> str:
    """The tagged string of one property value, or InvalidOperationError naming it."""
    if value is None:
        return "n:"
    if isinstance(value, bool):
        return f"b:{'true' if value else 'false'}"
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidOperationError(
                f"application property {name!r}: int {value} does not fit in 64 bits (S2.3)"
            )
        return f"i:{value}"
    if isinstance(value, float):
        return f"f:{value!r}"
    if isinstance(value, str):
        return f"s:{value}"
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return f"d:{aware.astimezone(timezone.utc).isoformat()}"
    if isinstance(value, timedelta):
        return f"t:{format_duration(value)}"
    if isinstance(value, uuid.UUID):
        return f"u:{value}"
    raise InvalidOperationError(
        f"application property {name!r} has a value of type {type(value).__name__}; allowed: "
        "str, bool, int, float, datetime, timedelta, uuid, None (S2.3)"
    )


def decode_value(encoded: str) -> Any:
    tag, _, text = encoded.partition(":")
    if tag == "n":
        return None
    if tag == "b":
        return text == "true"
    if tag == "i":
        return int(text)
    if tag == "f":
        return float(text)
    if tag == "s":
        return text
    if tag == "d":
        return datetime.fromisoformat(text)
    if tag == "t":
        return parse_duration(text, "stored duration")
    if tag == "u":
        return uuid.UUID(text)
    raise ValueError(f"unknown property encoding {encoded!r}")


def encode_properties(props: dict[str, Any] | None) -> dict[str, str] | None:
    if props is None:
        return None
    if not isinstance(props, dict):
        raise InvalidOperationError(
            f"application_properties must be a dict, got {type(props).__name__} (S2.3)"
        )
    out = {}
    for key, value in props.items():
        name = key.decode() if isinstance(key, bytes) else key
        if not isinstance(name, str):
            raise InvalidOperationError(
                f"application property name {key!r} must be a string (S2.3)"
            )
        out[name] = encode_value(name, value)
    return out


def decode_properties(encoded: dict[str, str] | None) -> dict[str, Any]:
    return {k: decode_value(v) for k, v in (encoded or {}).items()}
