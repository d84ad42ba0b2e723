"""Decisions 017 and 018: a window (forwarding or range lock) takes each partition's head
up to its first row no window may take, at most ``limit`` rows in all, earliest commits
first. The vectorized ``_prefixes`` is held to the row-by-row rule it replaced. No Spark."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sbqueue.engine.forward_window import _prefixes


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
