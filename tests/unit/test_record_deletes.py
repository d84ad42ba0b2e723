"""Which completion records a receive's commit deletes (``engine.records``, decision 011
and 049): pure logic, no Spark."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sbqueue.engine.records import (
    FOLD_AGE,
    FOLD_AT,
    RECORD_KEEP,
    records_due,
    settled_record_deletes,
)
from sbqueue.store.guarded import EXPECT_COLUMN, OP_COLUMN

NOW = datetime(2026, 11, 29, 12, tzinfo=timezone.utc)


def _deleted(records: list[tuple[int, int, str, datetime]], read: set[tuple[int, int]]
             ) -> set[tuple[int, int, str]]:
    rows = settled_record_deletes(records, read, "main", NOW)
    assert all(r[OP_COLUMN] == "delete" and r[EXPECT_COLUMN] == 0 and r["row_type"] == "c"
               and r["lane"] == "main" for r in rows)
    return {(r["partition_id"], r["sequence_number"], r["lock_token"]) for r in rows}


def test_s6_1_a_folded_records_row_goes_with_it() -> None:
    """A record of one token, young, its row not read (locked): the fold settles it."""
    assert _deleted([(3, 7, "t", NOW)], set()) == {(3, 7, "t")}


def test_s6_1_records_of_a_row_read_are_all_settled_by_its_outcome() -> None:
    """The row was read: its outcome applies its current token's record; the other
    token's record counts for nothing, ever."""
    records = [(3, 7, "old", NOW - timedelta(seconds=5)), (3, 7, "new", NOW)]
    assert _deleted(records, {(3, 7)}) == {(3, 7, "old"), (3, 7, "new")}


def test_s6_6_records_of_two_tokens_of_a_row_not_read_stay_until_they_are_old() -> None:
    """The fold takes the newest record, which may be a late writer's that counts for
    nothing: neither is deleted while young (the other may be the one that counts)."""
    young = [(3, 7, "old", NOW - timedelta(seconds=5)), (3, 7, "new", NOW)]
    assert _deleted(young, set()) == set()
    old = [(3, 7, "old", NOW - RECORD_KEEP - timedelta(seconds=1)), (3, 7, "new", NOW)]
    assert _deleted(old, set()) == {(3, 7, "old")}


def test_s6_1_a_partition_written_anyway_folds_its_records_at_once() -> None:
    """Decision 050: a receive that rewrites a partition (a lock, a cursor move) folds its
    records in that commit, however few and young: no file more."""
    records = [(3, 7, "t", NOW), (5, 9, "u", NOW)]
    assert records_due(records, {3}, NOW) == [(3, 7, "t", NOW)]


def test_s6_1_records_of_a_partition_not_written_wait_until_many_or_old() -> None:
    """Elsewhere they wait (a receive in a loop wrote a second file for the partition of
    the message completed before it): until ``FOLD_AT`` gathered or one is ``FOLD_AGE``
    old; then all of that partition go together, a message's two tokens judged together."""
    few = [(5, seq, "t", NOW) for seq in range(FOLD_AT - 1)]
    assert records_due(few, set(), NOW) == []
    many = [*few, (5, 99, "t", NOW)]
    assert records_due(many, set(), NOW) == many
    old = [(5, 1, "old", NOW - FOLD_AGE - timedelta(milliseconds=1)), (5, 1, "new", NOW),
           (6, 2, "t", NOW)]
    assert records_due(old, set(), NOW) == old[:2]
