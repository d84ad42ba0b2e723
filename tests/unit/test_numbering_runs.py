"""Decision 018: a range receive numbers a window's rows by runs (rows of one partition and
commit whose batch indexes and sequence numbers both go up by one) where a send grouped
its batch indexes by partition, so that one expression numbers them instead of a join.
``runs`` must give every row the number the claim gave it (S3.1). No Spark."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sbqueue.core.sequence import sequence_of
from sbqueue.engine.forward.window import NUMBERED
from sbqueue.engine.forward.window_rows import Run, runs


def _numbered(rows: list[tuple[int, int, int, int]]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    types = (pa.int32(), pa.int64(), pa.int64(), pa.int64())
    return pa.table([pa.array(c, t) for c, t in zip(columns, types, strict=True)],
                    names=list(NUMBERED))


def _number(found: list[Run], partition: int, version: int, index: int) -> int | None:
    hits = [r for r in found if (r.partition, r.version) == (partition, version)
            and r.low <= index <= r.high]
    assert len(hits) <= 1, "runs overlap"
    return index + hits[0].offset if hits else None


def test_s3_1_grouped_batch_indexes_make_one_run_per_partition_and_task() -> None:
    # partition 2: task 0 gave it indexes 5..9, task 1 (indexes from 1 << 33) 0..2
    task1 = 1 << 33
    rows = [(2, 4, i, sequence_of(2, 11 + k)) for k, i in enumerate(range(5, 10))]
    rows += [(2, 4, task1 + i, sequence_of(2, 16 + i)) for i in range(3)]
    rows += [(7, 4, 20 + i, sequence_of(7, 1 + i)) for i in range(4)]

    found = runs(_numbered(rows))

    assert [(r.partition, r.low, r.high) for r in found] == [
        (2, 5, 9), (2, task1, task1 + 2), (7, 20, 23)]
    assert all(_number(found, p, v, i) == s for p, v, i, s in rows)


def test_s3_1_interleaved_indexes_make_a_run_per_row_and_each_row_keeps_its_number() -> None:
    rng = np.random.default_rng(7)
    indexes = np.sort(rng.choice(10_000, 300, replace=False))  # a send not grouped
    rows = [(1, 3, int(i), sequence_of(1, 40 + k)) for k, i in enumerate(indexes)]
    rows += [(1, 5, 0, sequence_of(1, 340)), (1, 5, 1, sequence_of(1, 341))]

    found = runs(_numbered(rows))

    assert all(_number(found, p, v, i) == s for p, v, i, s in rows)
    assert _number(found, 1, 3, int(indexes[0]) + 1) is None or (
        int(indexes[1]) == int(indexes[0]) + 1)  # a gap row is numbered by no run
    assert found[-1] == Run(1, 5, 0, 1, sequence_of(1, 340))


def test_nothing_numbered_is_no_run() -> None:
    assert runs(_numbered([])) == []
