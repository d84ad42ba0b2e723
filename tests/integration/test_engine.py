"""S3, S4, S5, S6, S14.1 on real Spark + Delta through the DataFrame API."""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql import functions as F

from sbqueue.core.routing import partition_for
from sbqueue.engine import Namespace
from sbqueue.exceptions import InvalidOperationError, MessageSizeExceededError

pytestmark = pytest.mark.spark


@pytest.fixture
def queue(admin, spark, namespace_root):
    admin.create_queue("q", enable_partitioning=True, max_delivery_count=2)
    return Namespace(namespace_root, spark).entity("q")


def test_s3_1_s4_2_sequence_numbers_and_routing(queue, spark) -> None:
    """S3.1, S4.1, S4.2, S4.3: numbering and routing of a DataFrame send."""
    df = spark.range(200).selectExpr("CAST(id AS STRING) AS body",
                                     "IF(id < 100, concat('s', id % 5), NULL) AS session_id")
    assert queue.send_dataframe(df).count == 200
    rows = queue.messages().select("sequence_number", "partition_id", "session_id",
                                   "message_id").collect()
    assert len(rows) == 200
    ids = {r.message_id for r in rows}  # S2.6: a fresh uuid4 hex id for each message
    assert len(ids) == 200 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    by_partition: dict[int, list[int]] = {}
    for r in rows:
        assert r.sequence_number >> 48 == r.partition_id  # S3.1
        by_partition.setdefault(r.partition_id, []).append(r.sequence_number & ((1 << 48) - 1))
        if r.session_id is not None:  # S4.2: same function as the scalar path
            assert r.partition_id == partition_for(r.session_id, 16)
    for counters in by_partition.values():
        assert sorted(counters) == list(range(1, len(counters) + 1))
    assert len(by_partition) == 16  # S4.3: unkeyed messages are spread


@pytest.mark.slow
def test_s5_peek_lock_receive_complete_abandon(queue, spark) -> None:
    """S5.2, S5.3, S5.4, S6.1, S6.2, S6.6, S6.7, S7.1: the peek-lock cycle and the DLQ."""
    queue.send_dataframe(spark.range(64).selectExpr("CAST(id AS STRING) AS body"))
    got = queue.receive_dataframe(max_messages=1000).localCheckpoint()
    assert got.count() == 64
    assert got.where("delivery_count = 1 AND lock_token IS NOT NULL").count() == 64
    assert queue.messages().where("lock_token IS NOT NULL").count() == 64  # S5.4
    assert queue.receive_dataframe(max_messages=1000).count() == 0  # S5.2: all locked
    done, rest = got.where("partition_id < 8"), got.where("partition_id >= 8")
    n_done, n_rest = done.count(), rest.count()
    result = queue.complete_dataframe(done)  # S6.1
    assert result.settled == n_done and result.lock_lost == []
    twice = queue.complete_dataframe(done)  # S6.6: settled twice, told apart from lock lost
    assert twice.settled == 0 and twice.lock_lost == [] and len(twice.already_settled) == n_done
    assert queue.abandon_dataframe(rest).settled == n_rest  # S6.2
    third = queue.receive_dataframe(max_messages=1000).localCheckpoint()
    assert third.count() == n_rest and third.where("delivery_count = 2").count() == n_rest
    # S6.7: max_delivery_count=2; releasing after the 2nd delivery dead-letters.
    assert queue.abandon_dataframe(third).settled == n_rest
    assert queue.counts()["dead_letter"] == n_rest
    dlq = Namespace(queue.namespace.root, spark).entity("q/$DeadLetterQueue")
    dead = dlq.receive_dataframe(1000).localCheckpoint()
    assert dead.count() == n_rest
    assert {r[0] for r in dead.select("dead_letter_reason").collect()} == {
        "MaxDeliveryCountExceeded"}


def test_s5_1_receive_and_delete(queue, spark) -> None:
    """S5.1: receive-and-delete removes messages as it hands them out."""
    queue.send_dataframe(spark.range(20).selectExpr("CAST(id AS STRING) AS body"))
    taken = queue.receive_dataframe(100, mode="receive_and_delete").localCheckpoint()
    assert taken.count() == 20
    assert queue.counts()["total"] == 0


@pytest.mark.slow
def test_s6_3_s6_4_defer_and_dead_letter(queue, spark) -> None:
    """S6.3, S6.4, S5.6: deferred messages leave normal receive; dead-letter reasons."""
    queue.send_dataframe(spark.range(32).selectExpr("CAST(id AS STRING) AS body"))
    got = queue.receive_dataframe(1000).localCheckpoint()
    assert got.count() == 32
    first, second = got.where("partition_id < 8"), got.where("partition_id >= 8")
    queue.defer_dataframe(first)
    assert first.count() > 0 and second.count() > 0
    dl = queue.dead_letter_dataframe(second, reason="bad", error_description="why")
    assert dl.lock_lost == [] and dl.settled == second.count(), dl
    counts = queue.counts()
    assert counts["active"] == first.count() and counts["dead_letter"] == second.count()
    assert queue.receive_dataframe(100).count() == 0  # S5.6: deferred are not received
    with pytest.raises(InvalidOperationError, match=r"S6\.4"):
        queue.dead_letter_dataframe(second, reason="x" * 4097)


def test_s2_2_s2_4_bad_sends_store_nothing(queue, spark) -> None:
    """S2.1, S2.2, S2.4, S17: a bad send raises a clear error and stores nothing."""
    bad = spark.createDataFrame([("a", "s1", "p1"), ("b", None, None)],
                                "body string, session_id string, partition_key string")
    with pytest.raises(InvalidOperationError, match=r"S2\.2"):
        queue.send_dataframe(bad)
    big = spark.range(2).select(F.expr("repeat('x', 300000)").alias("body"))
    with pytest.raises(MessageSizeExceededError, match=r"S2\.4"):
        queue.send_dataframe(big)
    with pytest.raises(InvalidOperationError, match=r"S2\.1"):
        queue.send_dataframe(spark.range(1).selectExpr("'x' AS body", "1 AS nope"))
    assert queue.counts()["total"] == 0


def test_s14_1_sends_never_abort_receives(queue, spark) -> None:
    """S14.1: sends into the partitions while they are being received from, the two in
    time together; no receive aborts: each returns every message it asked for, and none
    had a conflict to retry."""
    from sbqueue.store.guarded import conflicts_retried

    queue.send_dataframe(spark.range(64).selectExpr("CAST(id AS STRING) AS body"))
    errors: list[BaseException] = []
    sends: list[tuple[float, float]] = []
    sending, received = threading.Event(), threading.Event()

    def sender() -> None:
        try:
            for i in range(12):  # until the receives are done, a few at least
                if received.is_set() and len(sends) >= 3:
                    return
                started = time.monotonic()
                sending.set()
                queue.send_dataframe(spark.range(16).selectExpr(f"'late-{i}' AS body"))
                sends.append((started, time.monotonic()))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=sender)
    before = conflicts_retried()
    thread.start()
    assert sending.wait(120)
    counts, receives = [], []
    for _ in range(3):
        started = time.monotonic()
        counts.append(queue.receive_dataframe(16).count())
        receives.append((started, time.monotonic()))
    received.set()
    thread.join()
    assert not errors
    assert counts == [16, 16, 16]  # none came back short
    assert conflicts_retried() == before  # no receive's commit met a send's
    assert any(s0 < r1 and r0 < s1 for s0, s1 in sends for r0, r1 in receives), (
        sends, receives)  # a send and a receive ran at the same time
    assert queue.counts()["total"] == 64 + 16 * len(sends)


def test_sql_view_by_documented_name(queue, spark) -> None:
    """Issue 2 point 6: each queue is queryable by ``Namespace.sql_name``."""
    queue.send_dataframe(spark.range(10).selectExpr("CAST(id AS STRING) AS body"))
    name = queue.namespace.sql_name("q")
    assert name.endswith(".q")
    assert spark.sql(f"SELECT count(*) AS n FROM {name} WHERE state = 'Active'").first().n == 10
    # A new session's catalog has no views (simulated by dropping the database): opening
    # the namespace and asking for the name registers them again.
    spark.sql(f"DROP DATABASE {queue.namespace.database} CASCADE")
    reopened = Namespace(queue.namespace.root, spark).sql_name("q")
    assert spark.sql(f"SELECT count(*) AS n FROM {reopened}").first().n == 10


def test_s5_2_a_receive_skips_locked_messages_ahead_of_it(admin, spark, namespace_root) -> None:
    admin.create_queue("one")
    queue = Namespace(namespace_root, spark).entity("one")
    queue.send_dataframe(spark.range(5).selectExpr("CAST(id AS STRING) AS body"))
    seen = [queue.receive_partitions([0], 1).first().sequence_number for _ in range(3)]
    assert seen == [1, 2, 3]  # S5.5: strict sequence order within the partition


@pytest.mark.slow
def test_s5_2_two_receivers_that_read_together_cannot_both_lock(admin, spark,
                                                                 namespace_root) -> None:
    """Both read the same head of partition 0 before either commits: one commits, the
    other's MERGE aborts (Delta conflict or the row-version guard); one lock stands."""
    from sbqueue.engine.receive import attempt as rx
    from sbqueue.engine.receive.on_spark import _changes
    from sbqueue.engine.schema import LEDGER_COLUMNS
    from sbqueue.store.guarded import EXPECT_COLUMN, OP_COLUMN, RETRYABLE

    admin.create_queue("race")
    queue = Namespace(namespace_root, spark).entity("race")
    queue.send_dataframe(spark.range(3).selectExpr("CAST(id AS STRING) AS body"))
    attempt = rx.Attempt(partitions=[0], share=1, total=1, ctx=queue.context(True),
                         lock_duration=queue.props.lock_duration,
                         latest_version=1)
    first = _changes(queue.ledger, queue.inbox, attempt, "main")
    second = _changes(queue.ledger, queue.inbox, attempt, "main")
    handed = [c.where("_handed").first() for c in (first, second)]
    assert handed[0].sequence_number == handed[1].sequence_number == 1

    def commit(changes) -> None:
        scope = rx.merge_scope([(0, "main", 0, 1)])
        queue.ledger.merge(scope, ["partition_id", "sequence_number"],
                           changes.where("_op IS NOT NULL").select(
                               *LEDGER_COLUMNS, EXPECT_COLUMN, OP_COLUMN),
                           LEDGER_COLUMNS)

    commit(first)
    with pytest.raises(RETRYABLE):
        commit(second)
    locked = queue.messages().where("lock_token IS NOT NULL").collect()
    assert [r.lock_token for r in locked] == [handed[0].lock_token]


def test_s5_4_receive_never_returns_or_locks_more_than_asked(queue, spark) -> None:
    """S5.4: at most max_messages, and nothing locked that is not returned, even when fewer
    are asked for than the queue has partitions."""
    queue.send_dataframe(spark.range(64).selectExpr("CAST(id AS STRING) AS body"))
    got = queue.receive_dataframe(max_messages=5).localCheckpoint()
    assert got.count() == 5
    assert got.select("partition_id").distinct().count() == 5  # one from each of 5
    assert queue.messages().where("lock_token IS NOT NULL").count() == 5
