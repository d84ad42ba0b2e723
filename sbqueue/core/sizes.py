"""Message size limits and the size of one message (SPEC S2.2, S2.4).

The engine computes the same size in Spark (``sbqueue.engine.send``) and is the final
judge; the client uses ``message_size`` to fill a ``ServiceBusMessageBatch`` before any
Spark job runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sbqueue.exceptions import InvalidOperationError

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


def _json_default(value: Any) -> str:
    return str(value)


def message_size(body: bytes, strings: Iterable[str | None],
                 application_properties: Mapping[str, Any] | None) -> int:
    """Body bytes + the UTF-8 bytes of every string property + the compact JSON of the
    application properties: the header is everything but the body (S2.4)."""
    header = sum(len(s.encode("utf-8")) for s in strings if s is not None)
    if application_properties:
        header += len(json.dumps(application_properties, separators=(",", ":"),
                                 default=_json_default).encode("utf-8"))
    return len(body) + header


def entity_limit(max_size_in_megabytes: int, partition_count: int) -> int:
    """Bytes an entity may hold (S1.6): its maximum size, 16 times that when it is a
    partitioned entity of a Standard namespace (16 partitions)."""
    factor = 16 if partition_count == 16 else 1
    return max_size_in_megabytes * 1024 * 1024 * factor


def check_dead_letter_text(reason: str | None, description: str | None) -> None:
    """S6.4: a dead-letter reason and description are at most 4096 characters each."""
    for what, text in (("reason", reason), ("error_description", description)):
        if text is not None and len(text) > DEAD_LETTER_TEXT_LIMIT:
            raise InvalidOperationError(
                f"dead-letter {what} is {len(text)} characters; at most "
                f"{DEAD_LETTER_TEXT_LIMIT} (S6.4)")
