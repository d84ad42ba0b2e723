"""Decisions 017 and 018: a window (forwarding or range lock) takes each partition's head
up to its first row no window may take, at most ``limit`` rows in all, earliest commits
first. The vectorized ``_prefixes`` is held to the row-by-row rule it replaced. No Spark."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sbqueue.engine.forward.window import (
    FileReach,
    IndexReach,
    _head_filter,
    _prefixes,
    _reaches,
)
from sbqueue.engine.receive.attempt import Cursor
from sbqueue.engine.schema import COPY_BITS


def _by_rows(parts: list[int], block: list[bool], limit: int) -> tuple[list[int], set[int]]:
    """The rule row by row: rows taken, and partitions reaching their first blocked row."""
    closed: set[int] = set()
    taken: list[int] = []
    reached: set[int] = set()
    for k, p in enumerate(parts):
        if p in closed:
            continue
        if block[k]:
            reached.add(k)
            closed.add(p)
        elif len(taken) >= limit:
            closed.add(p)
        else:
            taken.append(k)
    return taken, reached


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=60),
       st.integers(1, 30))
def test_prefixes_match_the_row_by_row_rule(rows: list[tuple[int, bool]], limit: int) -> None:
    parts = [p for p, _ in rows]
    block = [b for _, b in rows]
    taken, first_block = _prefixes(np.array(parts, dtype=np.int64),
                                   np.array(block, dtype=bool), limit)
    expected_taken, expected_reached = _by_rows(parts, block, limit)
    assert taken.tolist() == expected_taken
    assert set(first_block) == expected_reached


def test_a_partition_stops_at_its_first_blocked_row_and_others_go_on() -> None:
    parts = np.array([0, 1, 0, 1, 0, 1])
    block = np.array([False, False, True, False, False, False])
    taken, first_block = _prefixes(parts, block, 10)
    assert taken.tolist() == [0, 1, 3, 5]
    assert first_block == [2]


def test_a_claim_over_one_commit_reads_a_span_then_the_next_task_block_then_all() -> None:
    """Decision 018: a claim whose cursors are all in one commit reads each partition only
    a span past its cursor; a Spark send's next task starts its indexes at ``task << 33``,
    so the second reach is a span into the next block; the last reads all that is left."""
    first, block, everything = _reaches(1_000, None, dict.fromkeys(range(16), 0))
    assert first is not None and block is not None
    assert (first.bound(0, 4_999), block.bound(0, 4_999), everything) == (
        6_999, (1 << 33) + 2_000, None)
    assert block.bound(0, (1 << 33) + 5) == (2 << 33) + 2_000
    topic_first, _, _ = _reaches(1_000, "sub", dict.fromkeys(range(16), 0))
    assert topic_first is not None
    assert topic_first.bound(0, 0) == 2_000 << COPY_BITS  # a message's copies take 4096 indexes
    cursors = [Cursor(0, 7, 10, 3, 1), Cursor(1, 6, 2, 1, 1)]
    assert _head_filter(cursors, 7, first) == (
        "(partition_id = 0 AND batch_index > 10 AND batch_index <= 2010) OR partition_id = 1")
    assert _head_filter(cursors, 7) == "(partition_id = 0 AND batch_index > 10) OR partition_id = 1"


def test_a_claim_reads_to_the_end_of_the_file_where_its_share_is_reached() -> None:
    """Decision 018 (2026-11-28): where the commit's files are known, a partition is read
    up to the end of the file where its share (twice the claim's limit over its
    partitions) is reached, on into the next Spark task's block where its rows are there,
    so that one claim can fill a round whose windows cross a block."""
    task1 = 1 << 33
    ranges = {3: [(100, 199, 100), (200, 299, 100), (task1, task1 + 99, 100)],
              5: [(0, 49, 50)]}
    by_files, *_ = _reaches(200, None, {3: 99, 5: -1, 9: 0, 11: 0}, ranges)  # 2 with rows
    assert isinstance(by_files, FileReach) and by_files.rows == 200
    drained, *_ = _reaches(200, None, {3: 99, 5: 49}, ranges)  # partition 5 has none left
    assert isinstance(drained, FileReach) and drained.rows == 400
    assert isinstance(by_files, FileReach)
    assert by_files.bound(3, 99) == 299  # two files of 100 rows
    assert by_files.bound(3, 250) == task1 + 99  # the cut file counts whole: on to task 1
    assert by_files.bound(5, -1) == 49  # all its rows are fewer than its share
    assert by_files.bound(5, 49) == 49  # nothing after the cursor: no row read
    assert by_files.bound(7, 10) == 10  # a partition the commit did not write
    assert _head_filter([Cursor(3, 7, 250, 1, 1)], 7, by_files) == (
        f"(partition_id = 3 AND batch_index > 250 AND batch_index <= {task1 + 99})")
    assert _reaches(200, None, {3: 0, 5: 0})[0] == IndexReach(400, 0)  # files unknown


def test_a_file_of_consecutive_indexes_is_read_only_as_far_as_the_share() -> None:
    """A grouped send's file holds consecutive batch indexes, so the bound can stop inside
    it: a task of millions of rows a partition is read a share's worth, not whole (the
    driver's read cap). A file of scattered indexes counts whole."""
    grouped = FileReach({1: [(0, 4_999_999, 5_000_000)]}, 100)
    assert grouped.bound(1, 10) == 110
    assert grouped.bound(1, -1) == 99
    scattered = FileReach({1: [(0, 999, 10), (2_000, 2_999, 10)]}, 15)
    assert scattered.bound(1, 500) == 2_999  # the cut file counts whole: 10, then 20
