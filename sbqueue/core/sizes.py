"""Message size limits and the size of one message (SPEC S2.2, S2.4).

The engine computes the same size in Spark (``sbqueue.engine.send.frame``) and is the final
judge; the client uses ``message_size`` to fill a ``ServiceBusMessageBatch`` before any
Spark job runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sbqueue.exceptions import InvalidOperationError
from sbqueue.store.variant import to_json

__all__ = [
    "DEAD_LETTER_TEXT_LIMIT",
    "HEADER_LIMIT",
    "MAX_ID_LENGTH",
    "PREMIUM_BATCH_BYTES",
    "STANDARD_MESSAGE_BYTES",
    "STRING_PROPERTIES",
    "batch_limit",
    "check_dead_letter_text",
    "entity_limit",
    "is_utf8",
    "message_limit",
    "message_size",
]

# The settable string properties of a message (S2.1): with the application properties,
# what the header counts (S2.4).
STRING_PROPERTIES = ("message_id", "session_id", "partition_key", "correlation_id", "subject",
                     "content_type", "to", "reply_to", "reply_to_session_id")
MAX_ID_LENGTH = 128  # message_id, session_id, partition_key, reply_to_session_id (S2.2)
STANDARD_MESSAGE_BYTES = 256 * 1024  # per message and per batch on Standard (S2.4)
PREMIUM_BATCH_BYTES = 1024 * 1024  # a Premium batch (S2.4)
HEADER_LIMIT = 64 * 1024  # all properties of one message (S2.4)
DEAD_LETTER_TEXT_LIMIT = 4096  # characters of a dead-letter reason or description (S6.4)


def message_limit(max_message_size_in_kilobytes: int | None) -> int:
    """Largest message of an entity: its Premium setting, else the Standard 256 KB."""
    if max_message_size_in_kilobytes:
        return max_message_size_in_kilobytes * 1024
    return STANDARD_MESSAGE_BYTES


def batch_limit(max_message_size_in_kilobytes: int | None) -> int:
    """Largest batch of an entity: 256 KB on Standard, 1 MB on Premium (S2.4)."""
    if max_message_size_in_kilobytes:
        return PREMIUM_BATCH_BYTES
    return STANDARD_MESSAGE_BYTES


def is_utf8(text: str) -> bool:
    """Whether ``text`` has UTF-8 bytes to count and store: a lone surrogate (``"\\ud800"``
    in JSON, say) has none, and would fail later as a raw UnicodeEncodeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def message_size(body: bytes, strings: Iterable[str | None],
                 application_properties: Mapping[str, Any] | None) -> int:
    """Body bytes + the UTF-8 bytes of every string property + the UTF-8 bytes of the
    application properties' JSON as the engine writes it (``store.variant.to_json``, the
    engine being the final judge): the header is everything but the body (S2.4). Text
    without UTF-8 bytes counts as its escaped form (``validate`` refuses it first)."""
    header = sum(len(s.encode("utf-8", "backslashreplace")) for s in strings if s is not None)
    if application_properties is not None:
        text = to_json({str(k): v for k, v in application_properties.items()})
        header += len(text.encode("utf-8", "backslashreplace"))
    return len(body) + header


def entity_limit(max_size_in_megabytes: int, partition_count: int) -> int:
    """Bytes an entity may hold (S1.6): its maximum size, 16 times that when it is a
    partitioned entity of a Standard namespace (16 partitions)."""
    factor = 16 if partition_count == 16 else 1
    return max_size_in_megabytes * 1024 * 1024 * factor


def check_dead_letter_text(reason: str | None, description: str | None) -> None:
    """S6.4: a dead-letter reason and description are strings (or None) of at most 4096
    characters each, that UTF-8 can store."""
    for what, text in (("reason", reason), ("error_description", description)):
        if text is None:
            continue
        if not isinstance(text, str) or not is_utf8(text):
            raise InvalidOperationError(
                f"dead-letter {what} {text!r:.80} is not a str that UTF-8 can store (S6.4)")
        if len(text) > DEAD_LETTER_TEXT_LIMIT:
            raise InvalidOperationError(
                f"dead-letter {what} {text[:40]!r}... is {len(text)} characters; at most "
                f"{DEAD_LETTER_TEXT_LIMIT} (S6.4)")
