"""The commit watch a waiting receiver pauses on (``store.watch``, decision 045): it sees
a commit after the versions it marked, and nothing before one lands. Real Delta tables
written by delta-rs, no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from sbqueue.store.watch import Watch


def test_a_watch_sees_each_new_commit_once_marked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SBQUEUE_EXECUTOR", "local")  # the driver reads: a pass on Spark too
    one, two = str(tmp_path / "inbox"), str(tmp_path / "ledger")
    for path in (one, two):
        write_deltalake(path, pa.table({"v": [0]}))
    watch = Watch.watched([one, two])
    assert watch is not None and watch.tick > 0
    assert watch.mark() is True and watch.seen == [0, 0]  # the first mark reads the logs
    assert watch.moved() is False and watch.mark() is False
    write_deltalake(two, pa.table({"v": [1]}), mode="append")
    write_deltalake(two, pa.table({"v": [2]}), mode="append")
    assert watch.moved() is True
    assert watch.mark() is True and watch.seen == [0, 2]  # past every commit since
    assert watch.moved() is False
    write_deltalake(one, pa.table({"v": [1]}), mode="append")
    assert watch.moved() is True


def test_no_watch_where_the_driver_does_not_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SBQUEUE_EXECUTOR", "spark")
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"v": [0]}))
    assert Watch.watched([path]) is None
