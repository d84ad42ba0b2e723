"""The kept snapshot (``store.snapshot``) and sbqueue's own ledger writer
(``store.rewrite``), decision 047: each held against delta-rs's own reader of the same
real Delta table (its add actions and its dataset), no Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from sbqueue.store import driver, rewrite, snapshot, warm
from sbqueue.store.logfiles import has_commit, log_files

SCHEMA = pa.schema([("p", pa.int32()), ("lane", pa.string()), ("seq", pa.int64()),
                    ("note", pa.string())])


@pytest.fixture(autouse=True)
def _driver(monkeypatch: Any) -> None:
    """The driver's reads and commits: they run so in the suite's Spark pass too."""
    monkeypatch.setenv("SBQUEUE_EXECUTOR", "local")


def _rows(p: int, lane: str, first: int, n: int) -> pa.Table:
    return pa.Table.from_pylist([{"p": p, "lane": lane, "seq": first + i, "note": None}
                                 for i in range(n)], SCHEMA)


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger")
    write_deltalake(path, _rows(0, "main", 0, 2), partition_by=["p", "lane"],
                    configuration={"delta.isolationLevel": "Serializable"})
    write_deltalake(path, _rows(1, "main", 10, 2), mode="append")
    return path


def _live(path: str) -> set[str]:
    return set(pa.table(DeltaTable(path).get_add_actions(flatten=True)).column("path")
               .to_pylist())


def _all(path: str) -> list[tuple[Any, ...]]:
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted((r["p"], r["lane"], r["seq"]) for r in rows)


def test_a_snapshot_follows_every_commit_without_loading_again(tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    """Appends, a partition overwrite and a delete by delta-rs: after each, the snapshot's
    live files and version are delta-rs's, from the new commit files alone (one load)."""
    path = _table(tmp_path)
    loads: list[str] = []
    load = snapshot._load
    monkeypatch.setattr(snapshot, "_load", lambda p: loads.append(p) or load(p))
    steps = [lambda: write_deltalake(path, _rows(2, "main", 20, 3), mode="append"),
             lambda: write_deltalake(path, _rows(1, "main", 30, 1), mode="overwrite",
                                     predicate="p = 1 AND lane = 'main'"),
             lambda: DeltaTable(path).delete("seq = 0"),
             lambda: None]
    for step in steps:
        step()
        snap = snapshot.current(path)
        assert snap is not None
        assert snap.version == DeltaTable(path).version()
        assert set(snap.files) == _live(path)
        assert sorted(snap.adds.column("path").to_pylist()) == sorted(_live(path))
    assert len(loads) == 1


def test_a_changed_schema_loads_the_snapshot_again(tmp_path: Path) -> None:
    path = _table(tmp_path)
    assert snapshot.current(path) is not None
    wider = _rows(3, "main", 40, 1).append_column("extra", pa.array([1], pa.int64()))
    write_deltalake(path, wider, mode="append", schema_mode="merge")
    snap = snapshot.current(path)
    assert snap is not None and "extra" in snap.schema.names
    assert set(snap.files) == _live(path)


def _rewrite(path: str, read: snapshot.Snapshot, rows: pa.Table) -> int | None:
    scope = [{"p": 1, "lane": "main"}, {"p": 5, "lane": "main"}]
    return rewrite.rewrite(path, (read.version, read.adds), scope,
                           rows.cast(read.schema), "tag-1")


def test_a_rewrite_replaces_its_partitions_as_delta_rs_reads_them(tmp_path: Path) -> None:
    path = _table(tmp_path)
    read = snapshot.current(path)
    assert read is not None
    version = _rewrite(path, read, pa.concat_tables([_rows(1, "main", 70, 1),
                                                     _rows(5, "main", 80, 2)]))
    assert version == read.version + 1
    assert _all(path) == [(0, "main", 0), (0, "main", 1), (1, "main", 70), (5, "main", 80),
                          (5, "main", 81)]
    history = DeltaTable(path).history(1)[0]
    assert history["userMetadata"] == "tag-1" and history["operation"] == "WRITE"
    # the files written are kept decoded: the next read of them decodes nothing
    snap = snapshot.current(path)
    assert snap is not None and snap.version == version
    assert set(snap.files) == _live(path)


def test_a_rewrite_after_a_commit_in_its_partitions_commits_nothing(tmp_path: Path) -> None:
    """Delta's conflict check of a partition overwrite: a commit since the read that
    touched a partition rewritten leaves the table as that commit made it."""
    path = _table(tmp_path)
    read = snapshot.current(path)
    assert read is not None
    write_deltalake(path, _rows(1, "main", 50, 1), mode="append")  # into partition 1
    before = _all(path)
    assert _rewrite(path, read, _rows(1, "main", 70, 1)) is None
    assert _all(path) == before
    assert not has_commit(log_files(path), read.version + 2)
    written = [f for f in (Path(path) / "p=1" / "lane=main").iterdir()]
    assert len(written) == 2  # the rewrite's own file was deleted


def test_a_rewrite_after_a_commit_elsewhere_lands_after_it(tmp_path: Path) -> None:
    path = _table(tmp_path)
    read = snapshot.current(path)
    assert read is not None
    write_deltalake(path, _rows(0, "main", 50, 1), mode="append")  # partition 0 only
    assert _rewrite(path, read, _rows(1, "main", 70, 1)) == read.version + 2
    assert _all(path) == [(0, "main", 0), (0, "main", 1), (0, "main", 50), (1, "main", 70)]


def test_an_append_is_delta_rs_readable_and_kept_warm(tmp_path: Path,
                                                      monkeypatch: Any) -> None:
    path = _table(tmp_path)
    rows = [{"p": 1, "lane": "main", "seq": 90, "note": "x" * 40}]  # no string statistic
    version = rewrite.append(path, rows, "rec")
    assert version == 2
    assert (1, "main", 90) in _all(path)
    decoded: list[str] = []
    read = warm._read
    monkeypatch.setattr(warm, "_read", lambda f, *a: decoded.append(f) or read(f, *a))
    got = driver.scan(path, {"p": [1]}, None, lambda r: True)
    assert got is not None and sorted(r["seq"] for r in got) == [10, 11, 90]
    assert not any(f.endswith(".c000.parquet") for f in decoded)  # ours came from memory


def test_a_table_the_writer_would_write_wrongly_is_refused(tmp_path: Path) -> None:
    """An append-only table is not rewritten; a table with writer features this writer does
    not know (change data on writer version 4: check constraints, generated columns) is
    not written at all; nothing is committed."""
    for name, config, match in (
            ("append-only", {"delta.appendOnly": "true"}, "appendOnly"),
            ("feed", {"delta.enableChangeDataFeed": "true"}, "generatedColumns")):
        path = str(tmp_path / name)
        write_deltalake(path, _rows(0, "main", 0, 1), partition_by=["p", "lane"],
                        configuration=config)
        read = snapshot.current(path)
        assert read is not None
        with pytest.raises(rewrite.Refused, match=match):
            _rewrite(path, read, _rows(1, "main", 70, 1))
        assert DeltaTable(path).version() == 0


def test_rows_outside_the_scope_commit_nothing(tmp_path: Path) -> None:
    path = _table(tmp_path)
    read = snapshot.current(path)
    assert read is not None
    with pytest.raises(ValueError, match="outside the rewrite's scope"):
        _rewrite(path, read, _rows(0, "main", 70, 1))  # partition 0 is not rewritten
    assert DeltaTable(path).version() == read.version
    assert sorted(p.name for p in (Path(path) / "p=0" / "lane=main").iterdir()) == sorted(
        Path(f).name for f in _live(path) if f.startswith("p=0/"))


def test_a_remove_without_partition_values_is_a_conflict(tmp_path: Path) -> None:
    """A remove may omit its partition values (Delta's protocol): its path tells."""
    path = _table(tmp_path)
    read = snapshot.current(path)
    assert read is not None
    gone = next(f for f in read.files if f.startswith("p=1/"))
    log = log_files(path)
    assert log.put_if_absent(f"{read.version + 1:020d}.json", (
        '{"commitInfo":{"operation":"DELETE"}}\n'
        f'{{"remove":{{"path":"{gone}","deletionTimestamp":1,"dataChange":true}}}}\n'
    ).encode())
    assert _rewrite(path, read, _rows(1, "main", 70, 1)) is None


def test_a_log_cleaned_past_the_snapshot_loads_it_again(tmp_path: Path) -> None:
    """Log cleanup removes the commits before a checkpoint: a snapshot whose own commit is
    gone cannot tell whether commits after it went too, so it loads the table again (it
    saw version 1 as the latest, and would have kept it), and a rewrite read at a version
    no longer in the log commits nothing (its put would land behind the checkpoint): the
caller reads again, as after a conflict."""
    path = _table(tmp_path)
    stale = snapshot.current(path)
    assert stale is not None and stale.version == 1
    for n in range(3):
        write_deltalake(path, _rows(2, "main", 20 + n, 1), mode="append")
    DeltaTable(path).create_checkpoint()
    for f in (Path(path) / "_delta_log").glob("*.json"):
        if int(f.name[:20]) < 4:
            f.unlink()
    fresh = snapshot.current(path)
    assert fresh is not None and fresh.version == 4 and set(fresh.files) == _live(path)
    assert _rewrite(path, stale, _rows(1, "main", 70, 1)) is None
    assert DeltaTable(path).version() == 4


def test_a_table_not_followed_is_not_loaded_on_every_read(tmp_path: Path,
                                                         monkeypatch: Any) -> None:
    """A table the snapshot does not follow (a date partition column) is left to delta-rs,
    and looked at once, not loaded again by every read."""
    path = str(tmp_path / "dated")
    write_deltalake(path, pa.table({"d": pa.array([0], pa.date32()), "v": [1]}),
                    partition_by=["d"])
    loads: list[str] = []
    load = snapshot._load
    monkeypatch.setattr(snapshot, "_load", lambda p: loads.append(p) or load(p))
    assert snapshot.current(path) is None
    assert snapshot.current(path) is None
    assert len(loads) == 1
