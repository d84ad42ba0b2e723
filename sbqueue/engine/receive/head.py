"""A small receive's read of the inbox head (issue 41): the rows after the cursors, up to a
place in commit order told by the files the commits added.

A receive decided on the driver (``engine.receive.small``) takes the first rows after the
cursors in commit order (commit version, then batch index). Read without a bound, the
change feed of the commits it reads holds every row of them: one large send (1,000,000
rows, files of ~15,000 rows a partition) passed the driver's read cap, and each small
receive fell back to a Spark job over whole files. The bound comes from the add actions of
the commits after the cursors (``Inbox.commit_ranges``: one log file each, no data read):
walking them in order, it is the first place (commit, batch index) up to which at least
``rows`` rows after the cursors lie, counted low (a file of consecutive batch indexes, a
grouped send's, tells where each of its rows is; another file only that all of its rows
are at or before its highest index). The first ``rows`` rows of the head are then all
before the bound, so a read up to it finds them, and delta-rs skips the files of the
partitions with no rows before it and the row groups past it. Without a bound (a topic's
copies, commits not told here, fewer rows than asked within ``WALK`` commits) everything
after the cursors is read, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from pyspark.sql import functions as F

from sbqueue.engine.inbox import FileRange, Inbox
from sbqueue.engine.receive.attempt import Attempt, Cursor, after_cursors, as_aware, is_after
from sbqueue.engine.schema import LOCATOR, owned_rows, owns
from sbqueue.store.thresholds import WALK

__all__ = ["WALK", "Bound", "bound", "head_filter", "read_head"]

Bound = tuple[int, int]  # (commit version, batch index): the last place read
Ranges = Callable[[int], dict[int, list[FileRange]] | None]  # commit -> files per partition


def head_filter(cursors: Sequence[Cursor], end: int, rows: int,
                ranges: Ranges | None) -> tuple[str, bool]:
    """A filter (SQL) of the rows after ``cursors`` in commits up to ``end`` and whether
    it is bounded: where ``ranges`` tell a ``bound``, the rows up to it in the partitions
    with rows before it. delta-rs prunes files and row groups by it."""
    found = None if ranges is None or not cursors else bound(cursors, end, rows, ranges)
    if found is None:
        return " OR ".join(_clause(c, None) for c in cursors) or "false", False
    upto, held = found
    return " OR ".join(_clause(c, upto) for c in cursors if c.partition in held), True


def read_head(inbox: Inbox, cursors: list[Cursor], versions: tuple[int, int], a: Attempt,
              limit: int, columns: Sequence[str]) -> list[dict[str, Any]]:
    """The first ``limit`` inbox rows after the cursors of ``a.partitions`` in commits
    ``versions`` (first, last), in commit order, with ``columns`` (and the locator, the
    batch index, ``_commit_version``): read on the driver where the inbox is local (no
    Spark job), up to the ``bound``; else one top-k job."""
    start, end = versions
    partitions, after = set(a.partitions), is_after(cursors)
    mine = [c for c in cursors if c.partition in partitions]
    wanted = [*LOCATOR[:-1], *columns, "batch_index", "targets"]

    def read(where: str) -> list[dict[str, Any]] | None:
        return inbox.appended_here(
            start - 1, end, wanted, lambda r: r["partition_id"] in partitions
            and owns(a.target, r["targets"]) and after(r),
            ("_commit_version", "batch_index"), limit, where, may_follow(mine, ranges))

    # a topic's files count every subscription's copies: read after the cursors only
    ranges = inbox.commit_ranges if a.target is None else None
    where, bounded = head_filter(mine, end, limit, ranges)
    here = read(where)
    if here is not None and bounded and len(here) < limit:  # the files told wrong
        here = read(head_filter(mine, end, limit, None)[0])
    if here is not None:
        return here
    return [as_aware(r) for r in inbox.appended(
        start - 1, end, F.col("partition_id").isin(a.partitions) & owned_rows(a.target),
    ).where(after_cursors(cursors)).select(
        *LOCATOR[:-1], *columns, "batch_index", "_commit_version",
    ).orderBy("_commit_version", "batch_index").limit(limit).collect()]


def may_follow(cursors: Sequence[Cursor], ranges: Ranges | None = None
               ) -> Callable[[Mapping[str, Any], int], bool]:
    """Whether an inbox file (its partition values, the version that added it) may hold a
    row after ``cursors``: its partition has a cursor before that version, or at it with
    a row of that commit's partition past the cursor's batch index (by ``ranges``, the
    commit's files per partition; without them, any file at the cursor's version). A head
    read decodes no other file: the cursors of idle partitions stay behind, so the commits
    it walks are mostly rows it has passed, and each idle partition's cursor sits on the
    file of the last message it handed out."""
    since = {c.partition: (c.version, c.position) for c in cursors}

    def follows(values: Mapping[str, Any], version: int) -> bool:
        partition = int(values["partition_id"])
        place = since.get(partition)
        if place is None or version < place[0]:
            return False
        files = None if version > place[0] or ranges is None else ranges(version)
        if files is None or partition not in files:
            return True
        return any(high > place[1] for _, high, _ in files[partition])
    return follows


def _clause(c: Cursor, upto: Bound | None) -> str:
    after = (f"(_commit_version > {c.version} OR (_commit_version = {c.version} "
             f"AND batch_index > {c.position}))")
    if upto is None:
        return f"(partition_id = {c.partition} AND {after})"
    version, index = upto
    return (f"(partition_id = {c.partition} AND {after} AND (_commit_version < {version} "
            f"OR (_commit_version = {version} AND batch_index <= {index})))")


def bound(cursors: Sequence[Cursor], end: int, rows: int, ranges: Ranges
          ) -> tuple[Bound, set[int]] | None:
    """The first place (commit, batch index) up to which at least ``rows`` rows after
    ``cursors`` lie, looking through the commits from the earliest cursor's up to ``end``
    (at most ``WALK`` after it), and the partitions that may hold rows up to it; None
    where the files do not tell it."""
    start, taken, held = min(c.version for c in cursors), 0, set[int]()
    for version in range(start, min(end, start + WALK) + 1):
        files = ranges(version)
        if files is None:
            return None
        pieces = _pieces(cursors, version, files)
        here = _count(pieces, None)
        if taken + here >= rows:
            index = _least(pieces, rows - taken)
            return (version, index), held | {int(p) for p in pieces[pieces[:, 1] <= index, 0]}
        taken += here
        held |= {int(p) for p in pieces[:, 0]}
    return None


# A piece of a commit's rows after a cursor: (partition, first index, last index, rows).
# A run of consecutive indexes holds a row at each; any other piece holds ``rows`` rows
# somewhere from its first to its last index.
_PARTITION, _FIRST, _LAST, _ROWS = range(4)


def _pieces(cursors: Sequence[Cursor], version: int, files: dict[int, list[FileRange]]
            ) -> np.ndarray:
    """The pieces of commit ``version``'s rows after ``cursors``. A file of scattered
    indexes a cursor falls inside counts no rows (how many lie after it is unknown)."""
    pieces = []
    for c in cursors:
        if c.version > version:
            continue
        after = c.position if c.version == version else None
        for low, high, count in files.get(c.partition, []):
            if after is not None and high <= after:
                continue
            if high - low + 1 == count:
                first = low if after is None else max(low, after + 1)
                pieces.append((c.partition, first, high, high - first + 1))
            elif after is None or low > after:
                pieces.append((c.partition, low, high, count))
            else:  # some of its rows lie after the cursor: none counted, the file is read
                pieces.append((c.partition, after + 1, high, 0))
    return np.array(pieces, np.int64).reshape(-1, 4)


def _count(pieces: np.ndarray, upto: int | None) -> int:
    """Rows of ``pieces`` known to be at or before index ``upto`` (None: all)."""
    if upto is None:
        return int(pieces[:, _ROWS].sum())
    first, last, rows = pieces[:, _FIRST], pieces[:, _LAST], pieces[:, _ROWS]
    run = last - first + 1 == rows
    within = np.clip(np.minimum(last, upto) - first + 1, 0, None)
    return int(within[run].sum() + rows[~run & (last <= upto)].sum())


def _least(pieces: np.ndarray, need: int) -> int:
    """The lowest index up to which ``pieces`` hold at least ``need`` rows (they do in
    all): a binary search over indexes."""
    low, high = int(pieces[:, _FIRST].min()) - 1, int(pieces[:, _LAST].max())
    while high - low > 1:  # _count(low) < need <= _count(high)
        middle = (low + high) // 2
        low, high = (low, middle) if _count(pieces, middle) >= need else (middle, high)
    return high
