"""Issue 41: a small receive reads the inbox head only up to where the commits' files hold
the rows it may take (``engine.receive.head``). The bound is held to the rows themselves:
the first rows after the cursors, in commit order, all lie at or before it, in the
partitions it names. No Spark."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sbqueue.engine.receive.attempt import Cursor
from sbqueue.engine.receive.head import WALK, bound, head_filter, may_follow

# commit version -> partition -> files, each a list of distinct batch indexes
Layout = dict[int, dict[int, list[list[int]]]]


def _ranges(layout: Layout):  # type: ignore[no-untyped-def]
    def ranges(version: int) -> dict[int, list[tuple[int, int, int]]] | None:
        return {p: sorted((min(f), max(f), len(f)) for f in files if f)
                for p, files in layout.get(version, {}).items()}
    return ranges


def _head(layout: Layout, cursors: list[Cursor], end: int) -> list[tuple[int, int, int]]:
    """Every row after the cursors up to commit ``end``: (version, index, partition), in
    commit order."""
    places = {c.partition: (c.version, c.position) for c in cursors}
    return sorted((v, i, p) for v, parts in layout.items() if v <= end
                  for p, files in parts.items() if p in places
                  for f in files for i in f if (v, i) > places[p])


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[Layout, list[Cursor], int]:
    versions = draw(st.integers(1, 4))
    layout: Layout = {}
    for v in range(1, versions + 1):
        layout[v] = {}
        for p in range(3):
            taken: set[int] = set()
            files = []
            for _ in range(draw(st.integers(0, 3))):
                if draw(st.booleans()):  # consecutive indexes (a grouped send's file)
                    low = draw(st.integers(0, 200))
                    f = [i for i in range(low, low + draw(st.integers(1, 30))) if i not in taken]
                else:
                    f = sorted(set(draw(st.lists(st.integers(0, 250), max_size=20))) - taken)
                taken |= set(f)
                files.append(f)
            layout[v][p] = files
    cursors = [Cursor(p, draw(st.integers(0, versions)), draw(st.integers(-1, 260)), 0, 1)
               for p in range(3)]
    return layout, cursors, draw(st.integers(1, versions))


@settings(max_examples=200, deadline=None)
@given(_layouts(), st.integers(1, 60))
def test_the_first_rows_lie_within_the_bound(case: tuple[Layout, list[Cursor], int],
                                              rows: int) -> None:
    layout, cursors, end = case
    head = _head(layout, cursors, end)
    found = bound(cursors, end, rows, _ranges(layout))
    if found is None:
        # no bound only where fewer rows than asked lie within the commits looked at
        walked = [h for h in head if h[0] <= min(c.version for c in cursors) + WALK]
        assert len(walked) < rows or any(
            len(set(range(min(f), max(f) + 1))) != len(f) for parts in layout.values()
            for files in parts.values() for f in files if f)
        return
    (version, index), held = found
    within = [h for h in head if (h[0], h[1]) <= (version, index)]
    assert len(within) >= rows
    assert all(p in held for _, _, p in head[:rows])


def test_a_large_send_is_read_up_to_the_rows_asked() -> None:
    # one commit, two partitions of 100,000 consecutive indexes in two files each
    layout: Layout = {1: {0: [list(range(0, 50_000)), list(range(1 << 33, (1 << 33) + 50_000))],
                          1: [list(range(50_000, 100_000))]}}
    cursors = [Cursor(0, 1, 99, 100, 1), Cursor(1, 0, -1, 0, 0)]
    where, bounded = head_filter(cursors, 1, 132, _ranges(layout))
    assert bounded
    assert where == ("(partition_id = 0 AND (_commit_version > 1 OR (_commit_version = 1 AND "
                     "batch_index > 99)) AND (_commit_version < 1 OR (_commit_version = 1 AND "
                     "batch_index <= 231)))")  # partition 1's rows all come later: not read
    assert head_filter(cursors, 1, 132, None) == (
        "(partition_id = 0 AND (_commit_version > 1 OR (_commit_version = 1 AND "
        "batch_index > 99))) OR (partition_id = 1 AND (_commit_version > 0 OR "
        "(_commit_version = 0 AND batch_index > -1)))", False)


def test_a_scattered_file_the_cursor_falls_inside_is_read_but_not_counted() -> None:
    layout: Layout = {3: {0: [[0, 10, 20, 30]], 1: [list(range(100, 110))]}}
    (version, index), held = bound([Cursor(0, 3, 10, 2, 1), Cursor(1, 2, 5, 0, 1)], 3, 5,
                                   _ranges(layout))  # type: ignore[misc]
    assert (version, index) == (3, 104) and held == {0, 1}


@settings(max_examples=200, deadline=None)
@given(_layouts())
def test_a_file_is_decoded_when_it_may_hold_a_row_after_its_cursor(
        case: tuple[Layout, list[Cursor], int]) -> None:
    """Issue 45: a head walk decodes a file only where it may hold a row after its
    partition's cursor. Every file holding one is taken (nothing after the cursors is
    skipped); a file at its cursor's own commit whose rows all lie at or before the
    cursor is not (each idle partition's last handed message, on every receive)."""
    layout, cursors, _ = case
    follows = may_follow(cursors, _ranges(layout))
    places = {c.partition: (c.version, c.position) for c in cursors}
    for version, parts in layout.items():
        for partition, files in parts.items():
            taken = follows({"partition_id": partition}, version)
            after = [i for f in files for i in f if (version, i) > places[partition]]
            if after:
                assert taken, (version, partition, after)
            elif files and any(files) and version == places[partition][0]:
                assert not taken, (version, partition, files)
    assert may_follow(cursors)({"partition_id": cursors[0].partition}, cursors[0].version)
