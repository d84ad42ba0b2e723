"""Sequence numbers (SPEC S3.1): ``(partition_id << 48) | counter``, counter from 1."""

from __future__ import annotations

import hashlib

__all__ = ["COUNTER_BITS", "MAX_COUNTER", "SequenceNumber", "counter_of", "cursor_key",
           "make_sequence_number", "partition_of", "row_key", "sequence_of", "sequence_sql"]

COUNTER_BITS = 48
MAX_COUNTER = (1 << COUNTER_BITS) - 1

# A sequence number is an int (the SDK's type); these functions are the only place that
# knows its layout (issue 18, point 3), so no module shifts or masks one itself.
SequenceNumber = int


def make_sequence_number(partition_id: int, counter: int) -> int:
    if not 0 <= partition_id < (1 << 15):
        raise ValueError(f"partition id {partition_id} is out of range 0..32767")
    if not 1 <= counter <= MAX_COUNTER:
        raise ValueError(f"sequence counter {counter} is out of range 1..{MAX_COUNTER}")
    return (partition_id << COUNTER_BITS) | counter


def sequence_of(partition_id: int, counter: int) -> SequenceNumber:
    """``make_sequence_number`` without the range checks, for numbers built from stored
    counters (the hot path)."""
    return (partition_id << COUNTER_BITS) + counter


def sequence_sql(partition: str, counter: str) -> str:
    """``sequence_of`` as Spark SQL over two expressions (views and projections)."""
    return f"(shiftleft(CAST({partition} AS BIGINT), {COUNTER_BITS}) + {counter})"


def cursor_key(partition_id: int) -> SequenceNumber:
    """The key of a partition's cursor row: counter 0, before its first message."""
    return partition_id << COUNTER_BITS


def partition_of(sequence_number: int) -> int:
    return sequence_number >> COUNTER_BITS


def counter_of(sequence_number: int) -> int:
    return sequence_number & MAX_COUNTER


def row_key(kind: str, name: str) -> int:
    """The ledger key of a row that is not a message (a session's ``s`` row, a commit's
    ``t`` row): negative, so it never meets a sequence number, from a 62-bit hash of
    ``kind:name`` (two names of one partition meet with odds of n^2 / 2^63)."""
    digest = hashlib.blake2b(f"{kind}:{name}".encode(), digest_size=8).digest()
    return -1 - (int.from_bytes(digest, "big") >> 2)
