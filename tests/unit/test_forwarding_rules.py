"""The forwarding and maintenance rules without Spark (S13.2, S13.3, S3.3, S16.3)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sbqueue.core.durations import NEVER
from sbqueue.core.forwarding import (
    DISABLED_REASON,
    HOP_REASON,
    MISSING_REASON,
    Source,
    batch_token,
    carried_sequence,
    destination_of,
    next_hop,
    release_outcome,
    release_valid,
    source_of,
    transfer_reason,
)
from sbqueue.core.maintenance import PAST_COMMIT, Segment, idle_too_long, plan_segments
from sbqueue.core.transitions import Lane

NOW = datetime(2026, 11, 23, 12, 30, tzinfo=timezone.utc)
HOUR = 3600


def test_s13_3_the_fifth_hop_and_a_lost_destination_have_reasons() -> None:
    assert [transfer_reason(h, False, False) for h in (None, 0, 3)] == [None] * 3
    assert transfer_reason(4, False, False) == HOP_REASON  # about to make its 5th hop
    assert transfer_reason(0, True, False) == MISSING_REASON
    assert transfer_reason(0, False, True) == DISABLED_REASON
    assert transfer_reason(9, True, True) == MISSING_REASON  # the destination first


def test_s3_3_the_first_entity_number_is_carried_and_hops_counted() -> None:
    assert carried_sequence(0, 77) == 77  # never forwarded: this entity's number
    assert carried_sequence(None, 77) == 77
    assert carried_sequence(5, 77) == 5  # forwarded before: the first one's
    assert next_hop(None) == 1 and next_hop(3) == 4


def test_batch_tokens_say_which_sub_queue_they_came_from() -> None:
    main, dead = batch_token(Source.MAIN), batch_token(Source.DEAD_LETTER)
    assert (source_of(main), source_of(dead)) == (Source.MAIN, Source.DEAD_LETTER)
    assert main != batch_token(Source.MAIN)
    again = batch_token(Source.RESUBMIT, "orders/x")
    assert (source_of(again), destination_of(again), destination_of(main)) == (
        Source.RESUBMIT, "orders/x", None)
    with pytest.raises(ValueError, match="forwarding"):
        source_of("x123")
    with pytest.raises(ValueError, match="names its destination"):
        batch_token(Source.RESUBMIT)
    with pytest.raises(ValueError, match="unknown"):
        batch_token("z")


def test_s13_2_release_deletes_forwarded_rows_and_keeps_the_others_dead_lettered() -> None:
    row = {"lane": Lane.TRANSFER, "lock_token": "mabc", "_token": "mabc", "row_version": 3,
           "_reason": None, "_description": None}
    assert release_valid().evaluate(row) is True
    assert release_valid().evaluate({**row, "_token": "mother"}) is False
    assert release_valid().evaluate({**row, "lane": Lane.MAIN}) is False
    outcome = release_outcome()
    assert outcome["_op"].evaluate(row) == "delete"
    failed = {**row, "_reason": HOP_REASON, "_description": "d"}
    assert outcome["_op"].evaluate(failed) == "upsert"
    assert outcome["lane"].evaluate(failed) == Lane.TRANSFER_DEAD_LETTER
    assert outcome["dead_letter_reason"].evaluate(failed) == HOP_REASON
    assert outcome["lock_token"].evaluate(failed) is None


def _segment(partition: int, hours_ago: int, version: int, files: int = 1) -> Segment:
    return Segment(partition, int(NOW.timestamp()) // HOUR - hours_ago, version, files)


def test_segments_every_reader_passed_and_unreferenced_are_dropped() -> None:
    old, referenced, fresh, current = (_segment(0, 5, 10), _segment(1, 5, 10, files=3),
                                       _segment(2, 5, 50), _segment(3, 0, 1))
    at_end, inside = _segment(4, 5, 20), _segment(5, 5, 20)
    cursors = {p: (20, 7) for p in range(6)} | {4: (20, PAST_COMMIT)}
    plan = plan_segments([old, referenced, fresh, current, at_end, inside], cursors,
                         referenced={(1, referenced.segment)}, now=NOW,
                         keep_for=timedelta(0), segment_seconds=HOUR)
    assert plan.drop == {0: [old.segment], 4: [at_end.segment]}
    assert plan.compact == {1: [referenced.segment]}  # passed, still pointed at
    # fresh: its reader is behind; current: the hour is not over; inside: the cursor is
    # within the segment's last commit (more rows of it may follow)


def test_segments_inside_the_duplicate_window_stay() -> None:
    seg = _segment(0, 5, 10)
    cursors = {0: (20, 0)}
    assert plan_segments([seg], cursors, set(), NOW, timedelta(hours=2), HOUR).drop
    assert not plan_segments([seg], cursors, set(), NOW, timedelta(hours=6), HOUR).drop
    # no reader at all (a topic without subscriptions): every closed segment goes
    assert plan_segments([seg], None, set(), NOW, timedelta(0), HOUR).drop == {0: [seg.segment]}


def test_s16_3_idle_past_auto_delete_on_idle() -> None:
    five = timedelta(minutes=5)
    assert idle_too_long(NOW - timedelta(minutes=6), NOW, five)
    assert not idle_too_long(NOW - timedelta(minutes=4), NOW, five)
    assert not idle_too_long(NOW - timedelta(days=999), NOW, NEVER)
    assert not idle_too_long(None, NOW, five)
