"""Which view rows a peek shows, and in what order (docs/behaviour.md S9.1-S9.3): the pure
part of the driver's peek (``engine.reads.peek_here.peeked``), held to ``peek_dataframe``'s
filters and sort."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sbqueue.core.sequence import sequence_of
from sbqueue.engine.reads.peek_here import peeked

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)


def _row(partition: int, counter: int, seconds: float | None, sub_queue: str = "Main",
         session: str | None = None) -> dict[str, object]:
    at = None if seconds is None else T0 + timedelta(seconds=seconds)
    return {"sequence_number": sequence_of(partition, counter), "partition_id": partition,
            "enqueued_time_utc": at, "sub_queue": sub_queue, "session_id": session}


ROWS = [_row(1, 2, 5), _row(0, 1, 5), _row(0, 2, 1), _row(1, 1, None), _row(2, 1, 3, "DeadLetter"),
        _row(2, 2, 4, session="s")]


def _seqs(rows: list) -> list[tuple[int, int]]:  # type: ignore[type-arg]
    return [(r["partition_id"], r["sequence_number"] & 0xFFFF) for r in rows]


def test_s9_1_enqueued_time_then_number_with_a_null_time_first() -> None:
    assert _seqs(peeked(ROWS, "Main", 10)) == [(1, 1), (0, 2), (2, 2), (0, 1), (1, 2)]


def test_s9_1_at_most_the_count_asked() -> None:
    assert _seqs(peeked(ROWS, "Main", 2)) == [(1, 1), (0, 2)]
    assert peeked(ROWS, "Main", 0) == []


def test_s9_1_a_continued_peek_starts_strictly_after_the_last_one() -> None:
    after = (T0 + timedelta(seconds=5), sequence_of(0, 1))
    assert _seqs(peeked(ROWS, "Main", 10, after=after)) == [(1, 2)]
    naive = (after[0].replace(tzinfo=None), after[1])  # a naive time is UTC (core.clock)
    assert _seqs(peeked(ROWS, "Main", 10, after=naive)) == [(1, 2)]


def test_s9_3_from_a_number_within_its_partition() -> None:
    assert _seqs(peeked(ROWS, "Main", 10, from_sequence=sequence_of(0, 2))) == [(0, 2)]


def test_s9_2_a_sub_queue_and_a_session_show_their_own() -> None:
    assert _seqs(peeked(ROWS, "DeadLetter", 10)) == [(2, 1)]
    assert _seqs(peeked(ROWS, "Main", 10, session_id="s")) == [(2, 2)]
