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

from sbqueue.core.expr import Expr, coalesce, col, lit

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RoundRobin", "key_expr", "partition_for", "partitions_for", "routing_key"]


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


def key_expr(duplicate_detection: bool) -> Expr:
    """Key precedence (S4.1), the one definition: session id, else partition key, else the
    message id when the entity detects duplicates, else no key. The client evaluates it on
    a message; a DataFrame send compiles it to a column."""
    message_id = col("message_id") if duplicate_detection else lit(None)
    return coalesce(col("session_id"), col("partition_key"), message_id)


def routing_key(
    session_id: str | None,
    partition_key: str | None,
    message_id: str | None,
    duplicate_detection: bool,
) -> str | None:
    """``key_expr`` evaluated on one message's ids."""
    row = {"session_id": session_id, "partition_key": partition_key, "message_id": message_id}
    key: str | None = key_expr(duplicate_detection).evaluate(row)
    return key


class RoundRobin:
    """Spreads unkeyed messages over the partitions (S4.3); thread-safe."""

    def __init__(self, partitions: int, start: int = 0) -> None:
        self._partitions = max(1, partitions)
        self._counter = itertools.count(start)
        self._lock = threading.Lock()

    def pick(self, choices: list[int]) -> int:
        """The next of ``choices`` (the available partitions), evenly."""
        with self._lock:
            return choices[next(self._counter) % len(choices)]

    def take(self, count: int) -> list[int]:
        """The partitions for the next ``count`` unkeyed messages."""
        with self._lock:
            return [next(self._counter) % self._partitions for _ in range(count)]
