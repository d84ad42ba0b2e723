"""Decision 018: a complete settles a partition's range locks whole only when the frame
names every number they hold and no other. One receive may hold several windows of a
partition under one token (claims in turn); they count as one range only when their
numbers run on without a gap. No Spark."""

from __future__ import annotations

from datetime import datetime, timezone

from sbqueue.core.sequence import sequence_of
from sbqueue.core.transitions import Lane
from sbqueue.engine.forward.window import ForwardWindow
from sbqueue.engine.receive.attempt import Cursor
from sbqueue.engine.receive.ranges import Span, spans_of

NOW = datetime(2026, 11, 26, tzinfo=timezone.utc)


def _window(first: int, last: int) -> ForwardWindow:
    """Partition 3's window numbered ``first..last`` (counters)."""
    return ForwardWindow(3, Cursor(3, 7, 0, first - 1, 1), 7, 0, last, "t", NOW, NOW, 1,
                         Lane.MAIN)


def _span(*counters: int) -> Span:
    return spans_of((sequence_of(3, c), "t") for c in counters)[(3, "t")]


def test_s6_1_a_whole_range_is_covered_and_a_part_or_more_is_not() -> None:
    window = _window(10, 14)
    assert _span(10, 11, 12, 13, 14).covers([window])
    assert not _span(10, 11, 13, 14).covers([window])  # one missing
    assert not _span(9, 10, 11, 12, 13, 14).covers([window])  # one more


def test_s6_1_windows_of_one_receive_count_as_one_range_only_without_a_gap() -> None:
    both = [_window(10, 12), _window(13, 14)]
    assert _span(10, 11, 12, 13, 14).covers(both)
    assert _span(10, 11, 12, 13, 14).covers(both[::-1])
    assert not _span(10, 11, 12).covers(both)
    gap = [_window(10, 12), _window(15, 16)]  # another receive's window between them
    assert not _span(10, 11, 12, 13, 14, 15, 16).covers(gap)
    assert not _span(10, 11, 12, 15, 16).covers(gap)
