"""Entity names (SPEC S1.7): what is allowed, and the case-insensitive lookup key."""

from __future__ import annotations

import re

from sbqueue.exceptions import InvalidOperationError

__all__ = [
    "DEAD_LETTER_SUFFIX",
    "TRANSFER_DEAD_LETTER_SUFFIX",
    "name_key",
    "validate_entity_path",
    "validate_short_name",
]

DEAD_LETTER_SUFFIX = "$DeadLetterQueue"
TRANSFER_DEAD_LETTER_SUFFIX = "$Transfer/$DeadLetterQueue"

MAX_PATH = 260
MAX_SHORT_NAME = 50
_PATH_FORBIDDEN = set("@?#*\\")
_SHORT_FORBIDDEN = set("/\\")
_DRIVE = re.compile(r"^[A-Za-z]:")


def _check_common(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise InvalidOperationError(f"{what} must be a string, got {name!r} (S1.7)")
    if not name or not name.strip():
        raise InvalidOperationError(f"{what} must not be empty (S1.7)")
    if name != name.strip():
        raise InvalidOperationError(f"{what} {name!r} has leading or trailing spaces (S1.7)")
    bad = [c for c in name if ord(c) < 32 or ord(c) == 127]
    if bad:
        raise InvalidOperationError(f"{what} {name!r} contains control characters (S1.7)")
    return name


def validate_entity_path(name: object, what: str = "queue name") -> str:
    """Check a queue or topic path; return it unchanged (its case is kept for display)."""
    path = _check_common(name, what)
    if len(path) > MAX_PATH:
        raise InvalidOperationError(
            f"{what} {path[:40]!r}... is {len(path)} characters; at most {MAX_PATH} (S1.7)"
        )
    bad = sorted(set(path) & _PATH_FORBIDDEN)
    if bad:
        raise InvalidOperationError(
            f"{what} {path!r} contains {''.join(bad)!r}; '@ ? # * \\' are not allowed (S1.7)"
        )
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
    if len(short) > MAX_SHORT_NAME:
        raise InvalidOperationError(
            f"{what} {short!r} is {len(short)} characters; at most {MAX_SHORT_NAME} (S1.7)"
        )
    bad = sorted(set(short) & _SHORT_FORBIDDEN)
    if bad:
        raise InvalidOperationError(
            f"{what} {short!r} contains {''.join(bad)!r}; '/' and '\\' are not allowed (S1.7)"
        )
    if short in (".", ".."):
        raise InvalidOperationError(f"{what} {short!r} may not escape the namespace (S1.7)")
    return short


def name_key(name: str) -> str:
    """The lookup key of a name: names are case-insensitive (S1.7)."""
    return name.casefold()
