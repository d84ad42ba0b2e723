"""Duplicate detection (SPEC S11) as one rule on a message and the one sent before it.

Messages are grouped by (partition, message id, partition key) and ordered by commit
order (inbox commit version, then position in the send). A message is a duplicate when the
previous message of its group was enqueued at most ``window`` before it (S11.2). This holds
within one send, across sends, after the first copy was completed (the inbox keeps every
sent row) and between scheduled and immediate sends (S11.3). The rule looks at the previous
message only, accepted or not [decided]: in a run of copies less than a window apart each,
only the first is kept.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sbqueue.core.expr import Expr, col

__all__ = ["DUPLICATE_GROUP", "PREVIOUS_TIME", "dedupe_window", "is_duplicate"]

DUPLICATE_GROUP = ("partition_id", "message_id", "partition_key")
PREVIOUS_TIME = "_previous_enqueued_time"  # of the group's previous message, or NULL


def is_duplicate(window: timedelta) -> Expr:
    """True for a message whose group's previous message came at most ``window`` before."""
    previous = col(PREVIOUS_TIME)
    return previous.is_not_null() & (previous + window >= col("enqueued_time_utc"))


def dedupe_window(props: Any) -> timedelta | None:
    """The window of an entity that detects duplicates (S11.1), else None."""
    if not getattr(props, "requires_duplicate_detection", False):
        return None
    window: timedelta = props.duplicate_detection_history_time_window
    return window
