"""Warm reads (``store.warm``, decision 044): a table's data files decoded once per process.
Each read from memory is held against delta-rs's own reader of the same table (its dataset
and its change feed), on real Delta tables written by delta-rs, no Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from sbqueue.store import appended, driver, snapshot, warm
from sbqueue.store.objects import arrow_files


@pytest.fixture(autouse=True)
def _driver_reads(monkeypatch: Any) -> None:
    """These are the driver's reads: they run so in the suite's Spark pass too."""
    monkeypatch.setenv("SBQUEUE_EXECUTOR", "local")


SCHEMA = pa.schema([("p", pa.int32()), ("lane", pa.string()), ("seq", pa.int64()),
                    ("batch_index", pa.int64()), ("body", pa.string())])


def _rows(p: int, lane: str, first: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [{"p": p, "lane": lane, "seq": first + i, "batch_index": i, "body": f"b{first + i}"}
         for i in range(n)], SCHEMA)


def _table(tmp_path: Path, feed: bool = False) -> str:
    """Four partitions over five commits, one partition rewritten, one row deleted."""
    path = str(tmp_path / "t")
    config = {"delta.enableChangeDataFeed": "true"} if feed else None
    write_deltalake(path, _rows(0, "main", 0, 3), partition_by=["p", "lane"],
                    configuration=config)
    write_deltalake(path, _rows(1, "main", 10, 2), mode="append")
    write_deltalake(path, pa.concat_tables([_rows(0, "dlq", 20, 2), _rows(2, "main", 30, 4)]),
                    mode="append")
    write_deltalake(path, _rows(1, "main", 40, 1), mode="overwrite",
                    predicate="p = 1 AND lane = 'main'")
    write_deltalake(path, _rows(3, "main", 50, 5), mode="append")
    return path


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["p"], r["lane"], r["seq"]))


@pytest.mark.parametrize("partitions", [{"p": [0, 1, 2, 3]}, {"p": [1]},
                                        {"p": [0, 2], "lane": ["main"]}, {"lane": ["dlq"]}])
def test_a_partition_read_from_memory_is_delta_rs_own_read(
        tmp_path: Path, partitions: dict[str, list[Any]]) -> None:
    path = _table(tmp_path)
    table = DeltaTable(path)
    got = warm.partition_table(path, table, arrow_files(path), partitions, 1000)
    assert got is not None
    filters = [(name, "in", values) for name, values in partitions.items()]
    expected = table.to_pyarrow_table(filters=filters)
    assert got.schema == expected.schema
    assert _sorted(got.to_pylist()) == _sorted(expected.to_pylist())
    # the second read comes from memory and is the same
    again = warm.partition_table(path, table, arrow_files(path), partitions, 1000)
    assert again is not None and _sorted(again.to_pylist()) == _sorted(got.to_pylist())


def test_a_rewrite_is_seen_by_the_next_read(tmp_path: Path) -> None:
    path = _table(tmp_path)
    assert driver.scan(path, {"p": [1]}, ["seq"], lambda r: True) == [{"seq": 40}]
    pinned = driver.pin(path)
    assert pinned is not None
    pinned.rewrite([{"p": 1, "lane": "main"}],
                   [{"p": 1, "lane": "main", "seq": 41, "batch_index": 0, "body": "new"}])
    assert driver.scan(path, {"p": [1]}, ["seq", "body"], lambda r: True) == [
        {"seq": 41, "body": "new"}]


def test_the_rows_a_commit_added_are_its_change_feed(tmp_path: Path) -> None:
    path = _table(tmp_path, feed=True)
    table = DeltaTable(path)
    for version in range(table.version() + 1):
        got = warm.added(path, pa.schema(table.schema().to_arrow()), arrow_files(path),
                         version)
        feed = pa.table(table.load_cdf(starting_version=version, ending_version=version)
                        .read_all())
        inserts = [{k: v for k, v in r.items() if k not in ("_change_type", "_commit_timestamp")}
                   for r in feed.to_pylist() if r["_change_type"] == "insert"]
        if version == 3:  # a rewrite: its change feed is not only what it added
            assert got is None
            continue
        assert got is not None
        assert _sorted(got.to_pylist()) == _sorted(inserts), version


ORDER = ("_commit_version", "batch_index")


def _inbox(tmp_path: Path) -> str:
    """Six commits, each adding rows to partition 3 and to one of 0-2."""
    path = str(tmp_path / "inbox")
    write_deltalake(path, _rows(0, "main", 0, 2), partition_by=["p", "lane"],
                    configuration={"delta.enableChangeDataFeed": "true"})
    for version in range(1, 6):
        write_deltalake(path, pa.concat_tables([_rows(version % 3, "main", 10 * version, 3),
                                                _rows(3, "main", 10 * version + 5, 1)]),
                        mode="append")
    return path


def _decoding(monkeypatch: Any) -> list[str]:
    """The files decoded from storage from now on (the reads run as they are)."""
    decoded: list[str] = []
    read = warm._read

    def counted(file: str, *rest: Any) -> pa.Table:
        decoded.append(file)
        return read(file, *rest)
    monkeypatch.setattr(warm, "_read", counted)
    return decoded


def keep(row: dict[str, Any]) -> bool:
    return bool(row["p"] != 3)


def test_a_head_walk_is_the_change_feed_read(tmp_path: Path, monkeypatch: Any) -> None:
    """``driver.appended`` walking commits from memory gives what its change-feed read
    gives, for heads cut at every length (the walk stops at the commit that fills it)."""
    path = _inbox(tmp_path)
    for limit in (1, 4, 7, 100):
        walked = appended.appended(path, 0, 5, ["p", "seq"], keep, ORDER, limit)
        with monkeypatch.context() as m:
            m.setattr(warm, "BUDGET", 0)  # warm reads off: the change feed
            fed = appended.appended(path, 0, 5, ["p", "seq"], keep, ORDER, limit)
        assert walked is not None and fed is not None
        assert [(r["_commit_version"], r["batch_index"], r["seq"]) for r in walked] == [
            (r["_commit_version"], r["batch_index"], r["seq"]) for r in fed], limit


def test_a_head_walk_decodes_only_the_files_it_may_take(tmp_path: Path,
                                                       monkeypatch: Any) -> None:
    path = _inbox(tmp_path)
    decoded = _decoding(monkeypatch)
    taken = appended.appended(path, 0, 5, ["p", "seq"], keep, ORDER, 100,
                            take=lambda values, version: values["p"] != 3)
    monkeypatch.setattr(warm, "BUDGET", 0)
    assert taken == appended.appended(path, 0, 5, ["p", "seq"], keep, ORDER, 100)
    assert decoded and not any("p=3" in f for f in decoded)


def test_memory_held_stays_within_the_budget(tmp_path: Path, monkeypatch: Any) -> None:
    path = _table(tmp_path)
    table = DeltaTable(path)
    one = warm.partition_table(path, table, arrow_files(path), {"p": [3]}, 1000)
    assert one is not None
    monkeypatch.setattr(warm, "BUDGET", 2 * one.get_total_buffer_size())
    for p in range(4):
        warm.partition_table(path, table, arrow_files(path), {"p": [p]}, 1000)
    assert warm._held[0] <= warm.BUDGET


def test_a_pinned_table_not_rewritten_stays_warm(tmp_path: Path, monkeypatch: Any) -> None:
    """Where the snapshot does not follow a table, a receive that commits nothing gives its
    delta-rs table back: the next read brings it up to date incrementally instead of
    loading the table again."""
    monkeypatch.setattr(snapshot, "current", lambda path: None)
    path = _table(tmp_path)
    pinned = driver.pin(path)
    assert pinned is not None
    pinned.release()
    pinned.release()  # once only: a second release must not hand the table out twice
    again = driver.pin(path)
    assert again is not None and again.table is pinned.table
    other = driver.pin(path)  # taken while `again` holds it: a table of its own
    assert other is not None and other.table is not again.table
    again.release()
    other.release()


def test_reads_past_the_row_limit_stop_before_decoding(tmp_path: Path,
                                                       monkeypatch: Any) -> None:
    """A read of more rows than the driver reads (``ROW_LIMIT``) is told by the files'
    statistics before any file is decoded: a ledger read gives None, as the dataset's count
    did; a head walk leaves the read to the change feed (which prunes by ``where``, and
    here, past the limit too, gives None): a big send does not fill memory on every small
    receive."""
    ledger, inbox = _table(tmp_path), _inbox(tmp_path)
    decoded = _decoding(monkeypatch)
    monkeypatch.setattr(driver, "ROW_LIMIT", 3)
    monkeypatch.setattr(appended, "ROW_LIMIT", 3)
    assert driver.scan(ledger, {"p": [3]}, None, lambda r: True) is None  # 5 rows
    assert appended.appended(inbox, 0, 5, ["p", "seq"], keep, ORDER, 100) is None  # 20 rows
    assert decoded == []
    assert driver.scan(ledger, {"p": [1]}, ["seq"], lambda r: True) == [{"seq": 40}]


@pytest.mark.parametrize("partitions", [{"p": [0, 1, 2, 3]}, {"p": ["1"]},
                                        {"p": [0, 2], "lane": ["main"]}, {"lane": ["dlq"]}])
def test_python_rows_are_delta_rs_own_read_made_once_per_file(
        tmp_path: Path, partitions: dict[str, list[Any]]) -> None:
    """Issue 45: a ledger partition's Python rows are made once per file (a receive reads
    its partitions twice at one version) and are delta-rs's read of those partitions; a
    partition value may be asked as the log writes it (text) or typed."""
    path = _table(tmp_path)
    table = DeltaTable(path)
    adds = pa.table(table.get_add_actions(flatten=True))

    def read() -> list[list[dict[str, Any]]]:
        got = warm.partition_dicts(path, SCHEMA, ["p", "lane"], lambda: adds,
                                   arrow_files(path), partitions, 1000, list)
        assert got is not None
        return got

    first, second = read(), read()
    filters = [(name, "in", [str(v) for v in values]) for name, values in partitions.items()]
    expected = table.to_pyarrow_table(filters=filters).to_pylist()
    assert _sorted([row for rows in first for row in rows]) == _sorted(expected)
    assert [id(rows) for rows in first] == [id(rows) for rows in second]


def test_a_row_changed_by_its_reader_is_not_changed_in_memory(tmp_path: Path) -> None:
    """The rows kept per file are shared: ``Pinned.rows`` hands out copies, so a caller
    that changes a row (a receive folding its writes into the rows it read) leaves the
    next read as the table is."""
    path = _table(tmp_path)
    pinned = driver.pin(path)
    assert pinned is not None
    first = pinned.rows({"p": [2]}, None, lambda r: True)
    assert first is not None and len(first) == 4
    for row in first:
        row["body"] = "changed"
    again = pinned.rows({"p": [2]}, ["seq", "body"], lambda r: r["seq"] > 30)
    pinned.release()
    assert again == [{"seq": s, "body": f"b{s}"} for s in (31, 32, 33)]


def test_too_many_rows_are_told_before_python_rows_are_made(tmp_path: Path) -> None:
    path = _table(tmp_path)
    adds = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    with pytest.raises(warm.TooMany):
        warm.partition_dicts(path, SCHEMA, ["p", "lane"], lambda: adds, arrow_files(path),
                             {"p": [3]}, 4, list)


def test_a_message_this_process_sent_is_received_without_decoding_its_file(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Issue 45: a send keeps the inbox file it committed decoded (as a rewrite keeps the
    ledger files it wrote), so the receive that follows in the same process decodes no
    file: before, each such receive read the new message's file from storage."""
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.management import ServiceBusAdministrationClient

    root = str(tmp_path / "ns")
    ServiceBusAdministrationClient(root).create_queue("q", lock_duration="PT5M")
    with ServiceBusClient(root) as client, client.get_queue_sender("q") as sender, \
            client.get_queue_receiver("q", max_wait_time=5) as receiver:
        sender.send_messages(ServiceBusMessage("warm up"))  # the tables' first reads
        receiver.complete_message(receiver.receive_messages(1)[0])
        decoded = _decoding(monkeypatch)
        for n in range(3):
            sender.send_messages(ServiceBusMessage(f"m{n}"))
            got = receiver.receive_messages(1)
            assert [str(m) for m in got] == [f"m{n}"]
            receiver.complete_message(got[0])
    assert decoded == []


def test_threads_making_one_files_rows_count_them_once(tmp_path: Path) -> None:
    """Two threads that find a file's Python rows missing both make them; the memory held
    counts them once (counted twice, it drifted up for good and the budget shrank)."""
    import threading

    path = _table(tmp_path)
    adds = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    warm.partition_table(path, DeltaTable(path), arrow_files(path), {"p": [2]}, 1000)
    before = warm._held[0]
    barrier = threading.Barrier(4)

    def make(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        barrier.wait(5)  # every thread has missed the cache before any keeps its rows
        return rows

    threads = [threading.Thread(target=lambda: warm.partition_dicts(
        path, SCHEMA, ["p", "lane"], lambda: adds, arrow_files(path), {"p": [2]}, 1000,
        make)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    kept = warm.partition_dicts(path, SCHEMA, ["p", "lane"], lambda: adds,
                                arrow_files(path), {"p": [2]}, 1000, list)
    assert kept is not None
    assert warm._held[0] - before == sum(warm._dict_bytes(rows) for rows in kept)
