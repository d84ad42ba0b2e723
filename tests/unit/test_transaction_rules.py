"""Transaction rules as pure functions (S12.1, S12.3-S12.5), no Spark."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sbqueue.core.routing import partition_for
from sbqueue.core.sequence import make_sequence_number
from sbqueue.core.transactions import MAX_MESSAGES, TIMEOUT, TransactionScope
from sbqueue.exceptions import InvalidOperationError, OperationTimeoutError

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def scope(partitions: int = 16, dedupe: bool = False) -> TransactionScope:
    s = TransactionScope()
    s.enter("q", partitions, dedupe, 0, NOW)
    return s


def test_s12_1_one_entity() -> None:
    s = scope()
    with pytest.raises(InvalidOperationError, match=r"one entity.*S12.1"):
        s.enter("other", 16, False, 1, NOW)


def test_s12_3_a_send_on_a_partitioned_entity_needs_one_key() -> None:
    s = scope()
    with pytest.raises(InvalidOperationError, match=r"needs a partition key.*S12.3"):
        s.add_send(None, None, "id-1")  # a message id is a key only with dedupe
    s.add_send(None, "k", None)
    s.add_send(None, "k", "id-2")
    assert s.partition == partition_for("k", 16)
    with pytest.raises(InvalidOperationError, match=r"share one partition key.*S12.3"):
        s.add_send(None, "other", None)


def test_s12_3_message_id_is_the_key_with_duplicate_detection() -> None:
    s = scope(dedupe=True)
    s.add_send(None, None, "id-1")
    assert s.key == "id-1"


def test_s12_3_messages_of_different_sessions_are_refused() -> None:
    s = scope(partitions=1)
    s.add_send("a", None, None)
    with pytest.raises(InvalidOperationError, match=r"different sessions.*S12.3"):
        s.add_send("b", None, None)
    with pytest.raises(InvalidOperationError, match=r"one session.*S12.3"):
        s.add_session("c", 0)


def test_s12_3_an_unpartitioned_entity_takes_any_key() -> None:
    s = scope(partitions=1)
    s.add_send(None, None, None)
    s.add_send(None, "x", None)
    assert s.partition == 0


def test_s12_5_settlements_stay_in_the_transactions_partition() -> None:
    s = scope()
    s.add_send(None, "k", None)
    here = partition_for("k", 16)
    s.add_settlement(make_sequence_number(here, 7))
    with pytest.raises(InvalidOperationError, match=r"one partition.*S12.5"):
        s.add_settlement(make_sequence_number((here + 1) % 16, 7))


def test_s12_4_at_most_100_messages_and_two_minutes() -> None:
    s = scope()
    s.enter("q", 16, False, MAX_MESSAGES, NOW)
    with pytest.raises(InvalidOperationError, match=r"at most 100.*S12.4"):
        s.enter("q", 16, False, 1, NOW)
    late = scope()
    with pytest.raises(OperationTimeoutError, match=r"S12.4"):
        late.enter("q", 16, False, 1, NOW + TIMEOUT + timedelta(seconds=1))
