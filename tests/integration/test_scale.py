"""Issue 5 points 1, 2 and 5 on real Spark + Delta: partitions commit independently,
concurrent consumers spread, locks hold whatever the commit costs, reads never commit."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from sbqueue.engine import Namespace
from sbqueue.store import driver, guarded
from sbqueue.store.delta import latest_version

pytestmark = pytest.mark.spark


def _last_commit_partitions(path: str) -> set[int]:
    """The partitions whose files the newest commit of a local table added or removed (read
    from the commit file, as Delta's protocol defines it)."""
    log = Path(path) / "_delta_log"
    newest = max(log.glob("*.json"), key=lambda p: int(p.stem))
    touched = set()
    for line in newest.read_text().splitlines():
        action = json.loads(line)
        for kind in ("add", "remove"):
            if kind in action:
                touched.add(int(action[kind]["partitionValues"]["partition_id"]))
    return touched


@pytest.mark.slow
def test_s14_1_a_receive_commits_only_the_partitions_it_changes(admin, spark,
                                                                namespace_root) -> None:
    """Once a receiver knows the backlog, a batch that one partition can fill is one commit
    on that partition alone; a bulk receive still takes every partition in one commit."""
    admin.create_queue("q", enable_partitioning=True)
    queue = Namespace(namespace_root, spark).entity("q")
    queue.send_dataframe(spark.range(16 * 40).selectExpr("CAST(id AS STRING) AS body"))
    first = queue.receive_dataframe(16 * 8).localCheckpoint()  # learns all 16 partitions
    assert first.count() == 128
    assert len(_last_commit_partitions(queue.ledger_path)) == 16
    again = queue.receive_dataframe(20).localCheckpoint()
    assert again.count() == 20
    (partition,) = {r.partition_id for r in again.select("partition_id").collect()}
    assert _last_commit_partitions(queue.ledger_path) == {partition}
    queue.complete_dataframe(again)
    assert _last_commit_partitions(queue.ledger_path) == {partition}  # settle: its own only


@pytest.mark.slow
def test_s14_1_threads_spread_and_every_message_is_handed_out_once(admin, spark,
                                                                   namespace_root) -> None:
    """4 consumer threads, peek-lock + complete, until the queue is empty: nothing lost, no
    message twice, no receive or settle fails (S5.2, S14.1, S17)."""
    # A lock long enough for four threads on a 2-core machine: a shorter one expires while
    # a thread waits its turn, and the message is then (rightly) delivered again.
    admin.create_queue("busy", enable_partitioning=True, lock_duration="PT5M")
    queue = Namespace(namespace_root, spark).entity("busy")
    queue.send_dataframe(spark.range(400).selectExpr("CAST(id AS STRING) AS body"))
    seen: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def consume() -> None:
        try:
            idle = 0
            while idle < 2:
                got = queue.receive_dataframe(40).localCheckpoint()
                bodies = [bytes(r.body).decode() for r in got.select("body").collect()]
                if not bodies:
                    idle += 1
                    continue
                with lock:
                    twice = set(bodies) & set(seen)
                    seen.extend(bodies)
                assert not twice, f"handed out twice: {sorted(twice)}"
                result = queue.complete_dataframe(got)
                assert result.settled == len(bodies), result
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(seen, key=int) == [str(i) for i in range(400)]
    assert queue.counts()["total"] == 0


@pytest.mark.slow
def test_s5_2_a_slow_commit_does_not_eat_the_lock(admin, spark, namespace_root,
                                                  monkeypatch) -> None:
    """A commit made 3 s slower. Every receive leaves at least the lock duration minus the
    receive's own time; once the receiver has seen its commits' cost, the lock's clock
    starts when the commit succeeds (S5.2). The message stays locked against others, and
    completing it afterwards succeeds."""
    admin.create_queue("slow", lock_duration="PT30S")
    queue = Namespace(namespace_root, spark).entity("slow")
    queue.send_dataframe(spark.range(3).selectExpr("CAST(id AS STRING) AS body"))
    committed_at: list[datetime] = []

    def slowed(commit):
        def slow_commit(*args, **kwargs):  # the real commit, 3 s later
            time.sleep(3)
            try:
                return commit(*args, **kwargs)
            finally:
                committed_at.append(datetime.now(timezone.utc))
        return slow_commit

    # a receive commits on the driver (a rewrite) or, failing that, in a Spark MERGE
    monkeypatch.setattr(driver.Pinned, "rewrite", slowed(driver.Pinned.rewrite))
    monkeypatch.setattr(guarded, "merge_into", slowed(guarded.merge_into))
    for attempt in range(2):
        called = datetime.now(timezone.utc)
        got = queue.receive_dataframe(1).collect()
        returned = datetime.now(timezone.utc)
        left = (got[0].locked_until_utc.replace(tzinfo=timezone.utc) - returned).total_seconds()
        assert left >= 30 - (returned - called).total_seconds(), (attempt, left)
    since_commit = (returned - committed_at[-1]).total_seconds()
    assert left >= 30 - since_commit - 0.05, (left, since_commit)  # the clock began at commit
    monkeypatch.undo()
    assert queue.receive_dataframe(10).count() == 1  # the two locked ones stay locked
    result = queue.settle([(got[0].sequence_number, got[0].lock_token)], "complete")
    assert result.settled == 1


def test_issue5_point5_reads_never_commit_and_show_final_numbers(admin, spark,
                                                                 namespace_root) -> None:
    """S3.1, S9.1: a sent message is in the SQL view and in peek at once, with the sequence
    number a receive then gives it; none of these reads commits anything."""
    admin.create_queue("reads", enable_partitioning=True)
    queue = Namespace(namespace_root, spark).entity("reads")
    queue.send_dataframe(spark.range(40).selectExpr("CAST(id AS STRING) AS body"))
    versions = (latest_version(spark, queue.inbox_path), latest_version(spark, queue.ledger_path))
    view = queue.namespace.sql_name("reads")
    shown = {r.body: r.sequence_number for r in spark.sql(
        f"SELECT CAST(body AS STRING) AS body, sequence_number FROM {view}").collect()}
    assert len(shown) == 40
    assert queue.peek_dataframe(100).count() == 40
    assert queue.counts()["active"] == 40
    assert (latest_version(spark, queue.inbox_path),
            latest_version(spark, queue.ledger_path)) == versions
    got = queue.receive_dataframe(100).selectExpr("CAST(body AS STRING) AS body",
                                                  "sequence_number").collect()
    assert {r.body: r.sequence_number for r in got} == shown


def test_issue5_point4_a_cursor_behind_a_full_window_catches_up(admin, spark, namespace_root,
                                                                 monkeypatch) -> None:
    """Receives read a bounded window of inbox commits; a partition with nothing in the
    window moves its cursor to the window's end, so a message far behind is still found."""
    from sbqueue.core.routing import partition_for
    from sbqueue.engine.receive import attempt as rx

    monkeypatch.setattr(rx, "WINDOW_VERSIONS", 2)
    admin.create_queue("window", enable_partitioning=True)
    queue = Namespace(namespace_root, spark).entity("window")
    keys = {partition_for(f"k{i}", 16): f"k{i}" for i in range(200)}
    for n in range(4):  # four commits to partition 0, then one to partition 1
        queue.send_dataframe(spark.range(1).selectExpr(
            f"'p0-{n}' AS body", f"'{keys[0]}' AS partition_key"))
    queue.send_dataframe(spark.range(1).selectExpr("'p1' AS body",
                                                   f"'{keys[1]}' AS partition_key"))
    bodies = []
    for _ in range(4):
        bodies += [bytes(r.body).decode() for r in queue.receive_partitions([1], 10).collect()]
        if bodies:
            break
    assert bodies == ["p1"]
