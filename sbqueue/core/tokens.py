"""Lock tokens (S5.2): a message's lock is a UUID; a range lock's (decision 018: one token
for a run of consecutive messages, held by one ``w`` row) is a UUID of version 8, the
version RFC 9562 leaves to applications, so that a settlement can tell from the token
alone whether it may name a range and look for one only then (on the Spark executor that
look is a Spark job). Every other lock token is a version 4 UUID (Python's or Spark's
``uuid()``)."""

from __future__ import annotations

import uuid

__all__ = ["is_range_token", "range_token"]

_VERSION_BITS = 0xF << 76  # the version nibble of a UUID's 128 bits
_RANGE_VERSION = 8


def range_token() -> str:
    """A new range lock's token: random, version 8, RFC 9562's variant."""
    value = uuid.uuid4().int & ~_VERSION_BITS | _RANGE_VERSION << 76
    return str(uuid.UUID(int=value))


def is_range_token(token: str | None) -> bool:
    """Whether ``token`` is a range lock's (``range_token``); False for anything else,
    including text that is no UUID (a settlement then finds no lock of it)."""
    if not token:
        return False
    try:
        return uuid.UUID(token).version == _RANGE_VERSION
    except ValueError:
        return False
