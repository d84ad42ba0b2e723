"""Sequence numbers (SPEC S3.1): ``(partition_id << 48) | counter``, counter from 1."""

from __future__ import annotations

__all__ = ["COUNTER_BITS", "MAX_COUNTER", "counter_of", "make_sequence_number", "partition_of"]

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
