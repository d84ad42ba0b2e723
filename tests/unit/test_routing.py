"""S3.1 sequence numbers, S4 routing, S2.3 property values: pure logic."""

from __future__ import annotations

import pandas as pd
import pytest

from sbqueue.core.routing import RoundRobin, partition_for, partitions_for, routing_key
from sbqueue.core.sequence import counter_of, make_sequence_number, partition_of


def test_s4_2_murmur3_unsigned_mod_n_known_values() -> None:
    # mmh3.hash("hello", 0, signed=False) is 0x248bfa47 = 613153351 (murmur3 x86_32).
    assert partition_for("hello", 16) == 613153351 % 16
    assert partition_for("hello", 1) == 0
    assert 0 <= partition_for("ключ", 16) < 16  # utf-8 keys


def test_s4_2_vectorized_path_equals_scalar_path() -> None:
    keys = [f"key-{i}" for i in range(500)] + [None]
    got = partitions_for(pd.Series(keys, dtype="object"), 16).tolist()
    assert got[:-1] == [partition_for(k, 16) for k in keys[:-1]]
    assert got[-1] is pd.NA


def test_s4_1_key_precedence() -> None:
    assert routing_key("s", "p", "m", True) == "s"
    assert routing_key(None, "p", "m", True) == "p"
    assert routing_key(None, None, "m", True) == "m"
    assert routing_key(None, None, "m", False) is None


def test_s4_3_round_robin_spreads_a_batch() -> None:
    assert RoundRobin(4).take(8) == [0, 1, 2, 3, 0, 1, 2, 3]


def test_s3_1_sequence_number_layout() -> None:
    seq = make_sequence_number(7, 42)
    assert seq == (7 << 48) | 42
    assert partition_of(seq) == 7 and counter_of(seq) == 42
    assert make_sequence_number(0, 5) == 5  # non-partitioned: the plain counter
    with pytest.raises(ValueError):
        make_sequence_number(0, 0)
