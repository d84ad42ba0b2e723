"""Sequence numbers (SPEC S3.1): ``(partition_id << 48) | counter``, counter from 1."""

from __future__ import annotations

import hashlib

__all__ = ["COUNTER_BITS", "MAX_COUNTER", "counter_of", "make_sequence_number", "partition_of",
           "row_key"]

COUNTER_BITS = 48
MAX_COUNTER = (1 << COUNTER_BITS) - 1


def make_sequence_number(partition_id: int, counter: int) -> int:
    if not 0 <= partition_id < (1 << 15):
        raise ValueError(f"partition id {partition_id} is out of range 0..32767")
    if not 1 <= counter <= MAX_COUNTER:
        raise ValueError(f"sequence counter {counter} is out of range 1..{MAX_COUNTER}")
    return (partition_id << COUNTER_BITS) | counter


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
