"""The size quota of a queue or topic (S1.6), checked before each send.

Reading an entity's exact size is a query over its messages, too dear for every send. So a
``Quota`` trusts a size it read for ``QUOTA_SECONDS`` and adds its own sends to it in
between; the size it reads is first a bound from the inbox's file statistics (rows x
largest message, answered from the Delta log, never less than the truth), and only when
that bound reaches the limit the exact sum (decision 006). A topic's size is what its
subscriptions hold (one inbox row per copy).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from sbqueue.core.sizes import entity_limit
from sbqueue.exceptions import ServiceBusQuotaExceededError

__all__ = ["QUOTA_SECONDS", "Quota"]

QUOTA_SECONDS = 30.0  # how long a read entity size is trusted (S1.6)


class Quota:
    """S1.6 for one entity object: ``check`` before a send, ``add`` after it."""

    def __init__(self, path: str, megabytes: Callable[[], int], partitions: int,
                 bound: Callable[[], int], exact: Callable[[], int]) -> None:
        self.path = path
        self._megabytes = megabytes
        self._partitions = partitions
        self._bound = bound
        self._exact = exact
        self.held: tuple[int, float] = (0, -math.inf)  # bytes held, when read

    def check(self, incoming_bytes: int) -> None:
        """Refuse a send of ``incoming_bytes`` once the entity would exceed its size."""
        megabytes = self._megabytes()
        limit = entity_limit(megabytes, self._partitions)
        held, at = self.held
        if time.monotonic() - at > QUOTA_SECONDS:
            held = self._bound()
            if held + incoming_bytes > limit:
                held = self._exact()
            self.held = (held, time.monotonic())
        if held + incoming_bytes > limit:
            raise ServiceBusQuotaExceededError(
                f"{self.path} holds {held} bytes; with {incoming_bytes} more it would exceed "
                f"its maximum size of {limit} bytes (max_size_in_megabytes={megabytes}, "
                "S1.6)")

    def add(self, sent_bytes: int) -> None:
        """What a send of this object stored, until the next read."""
        self.held = (self.held[0] + sent_bytes, self.held[1])
