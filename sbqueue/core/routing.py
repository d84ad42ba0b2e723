"""Routing a message to a partition (SPEC S4): one function for every send path.

``partition_for`` is the single definition; ``partitions_for`` applies it to a pandas
Series (the vectorized form used inside Spark's Arrow UDFs), so a key lands on the same
partition whichever path sent it (S4.2).
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING

import mmh3

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RoundRobin", "partition_for", "partitions_for", "routing_key"]


def partition_for(key: str, partitions: int) -> int:
    """murmur3_32(utf8(key), seed 0), unsigned, mod the partition count (S4.2)."""
    if partitions <= 1:
        return 0
    return mmh3.hash(key.encode("utf-8"), 0, signed=False) % partitions


def partitions_for(keys: pd.Series, partitions: int) -> pd.Series:
    """``partition_for`` over a Series of keys; a null key gives a null partition."""
    return keys.map(lambda k: None if k is None else partition_for(k, partitions)).astype(
        "Int32"
    )


def routing_key(
    session_id: str | None,
    partition_key: str | None,
    message_id: str | None,
    duplicate_detection: bool,
) -> str | None:
    """Key precedence (S4.1): session id, else partition key, else message id when the
    entity detects duplicates, else no key."""
    if session_id is not None:
        return session_id
    if partition_key is not None:
        return partition_key
    if duplicate_detection and message_id is not None:
        return message_id
    return None


class RoundRobin:
    """Spreads unkeyed messages over the partitions (S4.3); thread-safe."""

    def __init__(self, partitions: int, start: int = 0) -> None:
        self._partitions = max(1, partitions)
        self._counter = itertools.count(start)
        self._lock = threading.Lock()

    def take(self, count: int) -> list[int]:
        """The partitions for the next ``count`` unkeyed messages."""
        with self._lock:
            return [next(self._counter) % self._partitions for _ in range(count)]
