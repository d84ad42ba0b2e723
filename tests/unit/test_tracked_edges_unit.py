"""The driver's own Delta writer at its edges (issue 41 item 4, decision 031), on real
Delta tables in temporary folders, read back with delta-rs; no Spark (Spark's side is
tests/integration/test_tracked_edges.py). The writer refuses (``Refused``, nothing
written) what it does not write, honours the table's checkpoint interval and log cleanup
properties, and finds the latest version without listing the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.types import StringType, StructField, StructType

from sbqueue.engine.schema import INBOX_PROPERTIES, INBOX_PROTOCOL, INBOX_SCHEMA
from sbqueue.store import checkpoints, created, driver, tracked
from sbqueue.store.objects import LocalFiles

PARTS = ["partition_id", "segment"]
STATS = INBOX_PROPERTIES["delta.dataSkippingStatsColumns"].split(",")
DAY = 86400


def _inbox(path: Path, properties: Mapping[str, str] | None = None,
           schema: StructType = INBOX_SCHEMA, protocol: Mapping[str, Any] = INBOX_PROTOCOL
           ) -> str:
    created.create_here(str(path), schema, PARTS, {**INBOX_PROPERTIES, **(properties or {})},
                        protocol)
    return str(path)


def _rows(n: int, **values: Any) -> pa.Table:
    send = uuid.uuid4().hex
    rows = [{"partition_id": i % 2, "segment": 0, "send_id": send, "batch_index": i,
             "body": b"x", **values} for i in range(n)]
    return pa.Table.from_pylist(rows, tracked.arrow_schema(INBOX_SCHEMA))


def _append(path: str, table: pa.Table | None = None) -> int | None:
    """One driver append, and the checkpoint it may ask for written (a worker thread
    writes it beside the caller)."""
    version = tracked.append_tracked(path, _rows(1) if table is None else table, PARTS, "t",
                                     STATS)
    checkpoints.written()
    return version


def _log(path: str) -> Path:
    return Path(path) / "_delta_log"


def _versions(path: str, suffix: str) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(_log(path))
                  if n.endswith(suffix) and n[:20].isdigit())


def _data_files(path: str) -> list[Path]:
    return [f for f in Path(path).rglob("*.parquet") if "_delta_log" not in f.parts]


def _commit(path: str, version: int, *actions: dict[str, Any]) -> None:
    """Another writer's commit (as a JSON line each)."""
    lines = [{"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "X"}},
             *actions]
    (_log(path) / f"{version:020d}.json").write_text(
        "\n".join(json.dumps(a) for a in lines) + "\n")


def _age(path: str, up_to: int, days: int = 40) -> None:
    """Every log file of versions up to ``up_to`` looks ``days`` old."""
    then = time.time() - days * DAY
    for name in os.listdir(_log(path)):
        if name[:20].isdigit() and int(name[:20]) <= up_to:
            os.utime(_log(path) / name, (then, then))


def test_the_tables_checkpoint_interval_is_honoured(tmp_path: Path) -> None:
    path = _inbox(tmp_path / "t", {"delta.checkpointInterval": "3"})
    for _ in range(10):
        _append(path)
    assert _versions(path, ".checkpoint.parquet") == [3, 6, 9]  # not 10: Delta's default
    table = DeltaTable(path)
    assert table.version() == 10 and table.to_pyarrow_table().num_rows == 10


def test_expired_log_files_are_removed_after_a_driver_checkpoint(tmp_path: Path) -> None:
    """Only driver sends: the checkpoint at 20 removes what is older than the table's
    ``delta.logRetentionDuration`` (30 days), up to the checkpoint at 10, and the lone
    checksum of version 0; the table still reads whole and takes fresh row ids."""
    path = _inbox(tmp_path / "t")
    for _ in range(12):
        _append(path)
    _age(path, 10)
    for _ in range(8):
        _append(path)

    assert _versions(path, ".json")[0] == 10
    assert _versions(path, ".crc") == []
    _append(path)
    ids = DeltaTable(path).to_pyarrow_table().num_rows
    assert ids == 21
    high = tracked._high_water_mark(LocalFiles(_log(path)), 21)
    assert high == 20  # ids 0..20, one per row, drawn across the cleaned log


def test_log_cleanup_is_off_where_the_table_says_so(tmp_path: Path) -> None:
    path = _inbox(tmp_path / "t", {"delta.enableExpiredLogCleanup": "false"})
    for _ in range(12):
        _append(path)
    _age(path, 10)
    for _ in range(8):
        _append(path)
    assert _versions(path, ".json") == list(range(21))


def test_rows_of_another_schema_are_refused_before_any_file(tmp_path: Path) -> None:
    """A namespace made by another sbqueue version, or altered by a user: the table's
    schema (as delta-rs holds it) is compared with the rows'; Spark enforces it instead."""
    wider = StructType([*INBOX_SCHEMA.fields, StructField("note", StringType())])
    path = _inbox(tmp_path / "t", schema=wider)
    with pytest.raises(tracked.Refused, match="note"):
        _append(path)
    assert _data_files(path) == [] and _versions(path, ".json") == [0]


def test_an_unknown_writer_feature_is_refused(tmp_path: Path) -> None:
    protocol = {**INBOX_PROTOCOL,
                "writerFeatures": [*INBOX_PROTOCOL["writerFeatures"], "someFutureFeature"]}
    path = _inbox(tmp_path / "t", protocol=protocol)
    with pytest.raises(tracked.Refused, match="someFutureFeature"):
        _append(path)
    assert _data_files(path) == [] and _versions(path, ".json") == [0]


def test_a_protocol_change_made_by_another_writer_is_seen(tmp_path: Path) -> None:
    """The state kept between appends is brought forward by the commits made since: a
    protocol committed by another writer after this process's last append refuses the
    next one."""
    path = _inbox(tmp_path / "t")
    assert _append(path) == 1
    protocol = {**INBOX_PROTOCOL,
                "writerFeatures": [*INBOX_PROTOCOL["writerFeatures"], "inCommitTimestamp"]}
    _commit(path, 2, {"protocol": protocol})
    with pytest.raises(tracked.Refused, match="inCommitTimestamp"):
        _append(path)
    assert _versions(path, ".json") == [0, 1, 2]


@pytest.mark.parametrize(("values", "column"), [
    ({"send_id": None}, "send_id"),
    ({"partition_id": None}, "partition_id"),  # never reaches the Parquet writer
    ({"application_properties": {"value": None, "metadata": b"\x01"}},
     "application_properties.value"),
])
def test_a_null_in_a_not_null_column_is_named_and_nothing_written(
        tmp_path: Path, values: dict[str, Any], column: str) -> None:
    """pyarrow builds a table with a null in a NOT NULL field without a word
    (apache/arrow#43145): the writer checks before writing any file (the bad row is in
    the second partition, so a check file by file would leave the first one's)."""
    path = _inbox(tmp_path / "t")
    rows = [{"partition_id": p, "segment": 0, "send_id": "s", "batch_index": p,
             "body": b"x"} for p in (0, 1)]
    rows.append({**rows[1], "batch_index": 2, **values})
    table = pa.Table.from_pylist(rows, tracked.arrow_schema(INBOX_SCHEMA))
    with pytest.raises(ValueError, match=f"column {column} is NOT NULL"):
        _append(path, table)
    assert _data_files(path) == [] and _versions(path, ".json") == [0]


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every folder listed while the test runs, and "delta-rs" for each table brought up
    to date with delta-rs (``driver.latest``: it lists the log, in Rust)."""
    seen: list[str] = []
    real_listdir, real_scandir, real_latest = os.listdir, os.scandir, driver.latest

    def latest(path: str) -> Any:
        seen.append("delta-rs")
        return real_latest(path)

    def listdir(folder: Any = ".") -> list[str]:
        seen.append(str(folder))
        return real_listdir(folder)

    def scandir(folder: Any = ".") -> Any:
        seen.append(str(folder))
        return real_scandir(folder)
    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(driver, "latest", latest)
    yield seen


def test_an_append_does_not_list_the_log(tmp_path: Path, listings: list[str]) -> None:
    """Between checkpoints an append finds the latest version and the row-id mark from
    the kept state, the ``_last_checkpoint`` hint and the commits after it, file by file:
    its cost does not grow with the log."""
    path = _inbox(tmp_path / "t")
    for _ in range(11):
        _append(path)
    listings.clear()
    for _ in range(5):
        _append(path)
    assert [f for f in listings if f.endswith("_delta_log") or f == "delta-rs"] == []
    assert DeltaTable(path).to_pyarrow_table().num_rows == 16


def test_a_stale_or_missing_checkpoint_hint_still_gives_the_right_mark(
        tmp_path: Path) -> None:
    path = _inbox(tmp_path / "t")
    for _ in range(21):
        _append(path)
    hint = _log(path) / "_last_checkpoint"
    hint.write_text(json.dumps({"version": 10, "size": 1}))  # stale: 20 is newer
    assert tracked._high_water_mark(LocalFiles(_log(path)), 21) == 20
    hint.unlink()
    assert tracked._high_water_mark(LocalFiles(_log(path)), 21) == 20


def _plain_table(path: Path) -> str:
    write_deltalake(str(path), pa.table({"p": pa.array([1, 2], pa.int32()),
                                         "x": pa.array([1, 2], pa.int64())}),
                    partition_by=["p"])
    return str(path)


@pytest.mark.local_executor  # the driver's commits stay on: the local executor's
def test_a_rewrite_delta_rs_refuses_is_not_a_conflict(tmp_path: Path) -> None:
    """delta-rs raises ``CommitFailedError`` both for a lost race and for a table feature
    it does not write (measured: "Commit failed: ..." against "Unsupported table features
    required: [...]"): the first is a ``Conflict`` to retry, the second ``Refused``, and
    the table's commits go to Spark from then on."""
    path = _plain_table(tmp_path / "t")
    pinned = driver.Pinned(path)
    write_deltalake(path, pa.table({"p": pa.array([1], pa.int32()),
                                    "x": pa.array([5], pa.int64())}), mode="append")
    with pytest.raises(driver.Conflict) as lost:
        pinned.rewrite([{"p": 1}], [{"p": 1, "x": 9}])
    assert not isinstance(lost.value, driver.Refused) and driver.commits_enabled(path)

    _commit(path, 2, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                                   "writerFeatures": ["inCommitTimestamp"]}})
    with pytest.raises(driver.Refused, match="InCommitTimestamp"):
        driver.Pinned(path).rewrite([{"p": 1}], [{"p": 1, "x": 9}])
    assert not driver.commits_enabled(path)
    assert DeltaTable(path).version() == 2


def test_a_blind_append_delta_rs_refuses_says_so_at_once(tmp_path: Path) -> None:
    """``driver.append`` (a ledger's completion records) retries lost races; a refusal is
    not one: ``Refused`` at the first try, not 20 "races" lost."""
    path = _plain_table(tmp_path / "t")
    _commit(path, 1, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                                   "writerFeatures": ["inCommitTimestamp"]}})
    started = time.monotonic()
    with pytest.raises(driver.Refused, match="InCommitTimestamp"):
        driver.append(path, [{"p": 1, "x": 3}], "tag")
    assert time.monotonic() - started < 5 and not driver.commits_enabled(path)
    assert DeltaTable(path).version() == 1


def test_the_checkpoint_is_written_beside_the_caller_and_waited_for(tmp_path: Path) -> None:
    """Issue 45: the checkpoint a driver commit asks for is written by the process's
    checkpoint thread, not the committing one; ``checkpoints.written`` waits for it."""
    path = _inbox(tmp_path / "t", {"delta.checkpointInterval": "2"})
    writers: list[str] = []
    write = checkpoints.now

    def spy(*args: Any) -> None:
        writers.append(threading.current_thread().name)
        write(*args)
    checkpoints.now = spy  # type: ignore[assignment]
    try:
        for _ in range(4):
            tracked.append_tracked(path, _rows(1), PARTS, "t", STATS)
        checkpoints.written()
    finally:
        checkpoints.now = write  # type: ignore[assignment]
    assert writers and all(w.startswith("sbqueue-checkpoint") for w in writers)
    assert _versions(path, ".checkpoint.parquet")[-1] == 4


def test_a_program_that_ends_after_its_commit_leaves_the_checkpoint(tmp_path: Path) -> None:
    """The checkpoint thread is joined at interpreter exit: a short program (a cron job,
    a script) whose last commit asked for a checkpoint still leaves it."""
    path = _inbox(tmp_path / "t", {"delta.checkpointInterval": "3"})
    program = (
        "import sys, uuid, pyarrow as pa\n"
        "from sbqueue.engine.schema import INBOX_PROPERTIES, INBOX_SCHEMA\n"
        "from sbqueue.store import tracked\n"
        "stats = INBOX_PROPERTIES['delta.dataSkippingStatsColumns'].split(',')\n"
        "for _ in range(3):\n"
        "    rows = [{'partition_id': 0, 'segment': 0, 'send_id': uuid.uuid4().hex,\n"
        "             'batch_index': 0, 'body': b'x'}]\n"
        "    table = pa.Table.from_pylist(rows, tracked.arrow_schema(INBOX_SCHEMA))\n"
        "    tracked.append_tracked(sys.argv[1], table, ['partition_id', 'segment'], 't',\n"
        "                           stats)\n")
    subprocess.run([sys.executable, "-c", program, path], check=True, timeout=120)
    assert _versions(path, ".checkpoint.parquet") == [3]
