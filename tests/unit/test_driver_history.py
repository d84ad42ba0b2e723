"""The log reads maintenance makes on the driver (``store.driver``): commits newest first
with their operation and user metadata, data files per partition, and the mark that tells
maintenance's own driver commits from an entity's use (S16.3). Real Delta tables written
by delta-rs, no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from sbqueue.store import driver, log_reads


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    rows = pa.table({"p": pa.array([0, 0, 1], pa.int32()), "v": [1, 2, 3]})
    write_deltalake(path, rows, partition_by=["p"])
    return path


def test_history_is_newest_first_with_operations_and_metadata(tmp_path: Path) -> None:
    path = _table(tmp_path)
    driver.append(path, [{"p": 1, "v": 4}], "tag-1")
    commits = log_reads.history(path)
    assert commits is not None
    assert [c[0] for c in commits] == [1, 0]
    assert [c[3] for c in commits] == ["tag-1", None]
    assert commits[0][2] == "WRITE" and commits[0][1] >= commits[1][1]
    assert log_reads.history(path, 1) == commits[:1]


def test_commits_made_inside_marked_carry_the_mark(tmp_path: Path) -> None:
    path = _table(tmp_path)
    pinned = driver.pin(path)
    assert pinned is not None
    with driver.marked("sbqueue-maintenance"):
        pinned.rewrite([{"p": 0}], [{"p": 0, "v": 9}])
    driver.append(path, [{"p": 1, "v": 5}], "after")  # outside: its own tag only
    pinned = driver.pin(path)
    assert pinned is not None
    pinned.rewrite([{"p": 1}], [{"p": 1, "v": 6}])
    commits = log_reads.history(path)
    assert commits is not None
    assert [c[3] for c in commits] == [None, "after", "sbqueue-maintenance", None]


def test_files_by_partition_counts_the_add_actions(tmp_path: Path) -> None:
    path = _table(tmp_path)
    driver.append(path, [{"p": 1, "v": 4}], "more")
    assert log_reads.files_by_partition(path, ["p"]) == {(0,): 1, (1,): 2}


def test_a_folder_that_is_not_a_table_is_none(tmp_path: Path) -> None:
    assert log_reads.history(str(tmp_path)) is None
    assert log_reads.files_by_partition(str(tmp_path), ["p"]) is None
