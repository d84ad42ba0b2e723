"""Entity names (SPEC S1.7): what is allowed, and the case-insensitive lookup key."""

from __future__ import annotations

import re

from sbqueue.core.sizes import is_utf8
from sbqueue.exceptions import InvalidOperationError

__all__ = [
    "DEAD_LETTER_SUFFIX",
    "SUBSCRIPTIONS_SEGMENT",
    "TRANSFER_DEAD_LETTER_SUFFIX",
    "name_key",
    "subscription_parts",
    "validate_entity_path",
    "validate_short_name",
]

DEAD_LETTER_SUFFIX = "$DeadLetterQueue"
TRANSFER_DEAD_LETTER_SUFFIX = "$Transfer/$DeadLetterQueue"
SUBSCRIPTIONS_SEGMENT = "Subscriptions"  # <topic>/Subscriptions/<subscription>

MAX_PATH = 260
MAX_SHORT_NAME = 50
_PATH_FORBIDDEN = set("@?#*\\")
_SHORT_FORBIDDEN = set("/\\")
_DRIVE = re.compile(r"^[A-Za-z]:")


def _check_common(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise InvalidOperationError(f"{what} must be a string, got {name!r} (S1.7)")
    if not name or not name.strip():
        raise InvalidOperationError(f"{what} must not be empty, got {name!r} (S1.7)")
    if name != name.strip():
        raise InvalidOperationError(f"{what} {name!r} has leading or trailing spaces (S1.7)")
    bad = [c for c in name if ord(c) < 32 or ord(c) == 127]
    if bad:
        raise InvalidOperationError(f"{what} {name!r} contains control characters (S1.7)")
    if not is_utf8(name):
        raise InvalidOperationError(
            f"{what} {name!r} holds a lone surrogate; names are stored as UTF-8 (S1.7)")
    return name


def _check_length_and_characters(name: str, what: str, limit: int, forbidden: set[str]) -> None:
    if len(name) > limit:
        raise InvalidOperationError(
            f"{what} {name[:40]!r}... is {len(name)} characters; at most {limit} (S1.7)"
        )
    bad = sorted(set(name) & forbidden)
    if bad:
        allowed = " ".join(sorted(forbidden))
        raise InvalidOperationError(
            f"{what} {name!r} contains {''.join(bad)!r}; {allowed!r} are not allowed (S1.7)"
        )


def validate_entity_path(name: object, what: str = "queue name") -> str:
    """Check a queue or topic path; return it unchanged (its case is kept for display)."""
    path = _check_common(name, what)
    _check_length_and_characters(path, what, MAX_PATH, _PATH_FORBIDDEN)
    if path.startswith("/") or _DRIVE.match(path):
        raise InvalidOperationError(
            f"{what} {path!r} is an absolute path; names stay inside the namespace (S1.7)"
        )
    if path.endswith("/") or "//" in path:
        raise InvalidOperationError(
            f"{what} {path!r} has an empty segment (leading, trailing or doubled '/') (S1.7)"
        )
    for segment in path.split("/"):
        if segment in (".", ".."):
            raise InvalidOperationError(
                f"{what} {path!r} has a {segment!r} segment; names may not escape the "
                "namespace (S1.7)"
            )
        if segment.startswith("$"):
            raise InvalidOperationError(
                f"{what} {path!r}: segments starting with '$' are reserved for sub-queues "
                "(S1.7, S7.1)"
            )
    return path


def validate_short_name(name: object, what: str = "subscription name") -> str:
    """Check a subscription or rule name: at most 50 characters, no '/' or '\\'."""
    short = _check_common(name, what)
    _check_length_and_characters(short, what, MAX_SHORT_NAME, _SHORT_FORBIDDEN)
    if short in (".", ".."):
        raise InvalidOperationError(f"{what} {short!r} may not escape the namespace (S1.7)")
    return short


def subscription_parts(path: str) -> tuple[str, str] | None:
    """(topic, subscription) of a ``<topic>/Subscriptions/<name>`` path (the segment in any
    case; a topic's own name may hold slashes); None for any other path."""
    parts = path.rsplit("/", 2)
    if len(parts) == 3 and parts[1].lower() == SUBSCRIPTIONS_SEGMENT.lower():
        return parts[0], parts[2]
    return None


def name_key(name: str) -> str:
    """The lookup key of a name: names are case-insensitive (S1.7)."""
    return name.casefold()
