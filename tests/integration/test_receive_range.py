"""Bulk receives by range lock (decision 018, docs/behaviour.md S5.4, S6.1-S6.6): a
DataFrame receive of many fresh messages locks them as ranges; a complete of the whole
receive releases the ranges in one commit; any other settlement, and a lock that ran out,
turn a range into message rows first, so every rule holds as for a message locked alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.routing import partition_for
from sbqueue.core.transitions import Lane
from sbqueue.engine.receive.ranges import MIN_RANGE
from sbqueue.engine.schema import WINDOW
from sbqueue.spark.plans import executed_plan

pytestmark = pytest.mark.spark

LOCK = timedelta(minutes=2)


def _queue(admin, spark, name: str, count: int):  # type: ignore[no-untyped-def]
    admin.create_queue(name, enable_partitioning=True, lock_duration=LOCK)
    queue = admin.namespace.entity(name)
    queue.send_dataframe(spark.range(count).selectExpr("CAST(id AS STRING) AS body"))
    return queue


def _ledger_kinds(queue) -> dict[str, int]:  # type: ignore[no-untyped-def]
    rows = queue.ledger.rows().groupBy("row_type").count().collect()
    return {str(r[0]): int(r[1]) for r in rows}


def _jobs(spark, fn):  # type: ignore[no-untyped-def]
    """(result, Spark jobs) of ``fn``, counted through a job group of this thread."""
    sc = spark.sparkContext
    sc.setJobGroup("counted", "counted")
    try:
        return fn(), len(sc.statusTracker().getJobIdsForGroup("counted"))
    finally:
        sc.setJobGroup("", "")


@pytest.mark.local_executor
@pytest.mark.parametrize("in_send_order", [
    False, pytest.param(True, marks=pytest.mark.slow)])  # grouped by partition: the default
def test_s3_1_s5_4_a_range_receive_numbers_messages_as_the_view_does(admin, spark,
                                                                     in_send_order) -> None:
    admin.create_queue("numbered", enable_partitioning=True, lock_duration=LOCK)
    queue = admin.namespace.entity("numbered")
    queue.send_dataframe(spark.range(3 * MIN_RANGE).selectExpr("CAST(id AS STRING) AS body"),
                         in_send_order=in_send_order)
    before = queue.messages().select(F.col("body").cast("string").alias("body"),
                                     "sequence_number").localCheckpoint()

    got = queue.receive_dataframe(3 * MIN_RANGE)

    plan = executed_plan(got)
    assert ("Join" in plan) == in_send_order  # a grouped send's runs need no join
    assert_df_equality(got.select(F.col("body").cast("string").alias("body"),
                                  "sequence_number"), before, ignore_row_order=True,
                       ignore_nullable=True)
    got.localCheckpoint()  # the caller reads its messages, then completes the same frame
    result, jobs = _jobs(spark, lambda: queue.complete_dataframe(got))
    assert (result.settled, result.lock_lost, jobs) == (3 * MIN_RANGE, [], 0)
    assert queue.counts()["total"] == 0


@pytest.mark.local_executor
def test_s5_4_s6_1_a_bulk_receive_is_range_locked_and_completed_whole(admin, spark) -> None:
    queue = _queue(admin, spark, "ranges", 3 * MIN_RANGE)

    got = queue.receive_dataframe(3 * MIN_RANGE).localCheckpoint()

    [seen] = got.agg(F.count("*"), F.count_distinct("lock_token"),
                     F.collect_set("delivery_count"),
                     F.count_distinct("sequence_number")).collect()
    assert tuple(seen) == (3 * MIN_RANGE, 1, [1], 3 * MIN_RANGE)  # one token, each once
    kinds = _ledger_kinds(queue)
    assert kinds.get("m", 0) == 0 and kinds[WINDOW] >= 1  # no row per message
    view = queue.messages()
    assert view.where(F.col("lock_token").isNull()).count() == 0  # every one locked
    assert queue.counts()["active"] == 3 * MIN_RANGE
    assert queue.receive_dataframe(10).count() == 0  # nothing else to hand out

    result = queue.complete_dataframe(got)

    assert (result.settled, result.lock_lost) == (3 * MIN_RANGE, [])
    assert queue.counts()["total"] == 0
    assert _ledger_kinds(queue).get(WINDOW, 0) == 0


@pytest.mark.slow  # the default run keeps the whole-range case
def test_s6_2_s6_3_part_of_a_range_settles_message_by_message(admin, spark) -> None:
    queue = _queue(admin, spark, "parts", 2 * MIN_RANGE)
    got = queue.receive_dataframe(2 * MIN_RANGE).orderBy("sequence_number").localCheckpoint()
    seqs = [r[0] for r in got.select("sequence_number").collect()]
    first, second = seqs[:100], seqs[100:200]

    done = queue.complete_dataframe(got.where(F.col("sequence_number").isin(first)))
    back = queue.abandon_dataframe(got.where(F.col("sequence_number").isin(second)))

    assert (done.settled, back.settled) == (100, 100)
    again = queue.receive_dataframe(500).localCheckpoint()  # the abandoned ones return
    assert sorted(r[0] for r in again.select("sequence_number").collect()) == sorted(second)
    assert {r[0] for r in again.select("delivery_count").distinct().collect()} == {2}
    assert queue.counts()["active"] == 2 * MIN_RANGE - 100


@pytest.mark.slow  # the default run keeps the whole-range case
def test_s5_3_s6_6_a_range_whose_lock_ran_out_is_delivered_again(clock, admin, spark) -> None:
    queue = _queue(admin, spark, "lapsed", MIN_RANGE)
    first = queue.receive_dataframe(MIN_RANGE).localCheckpoint()
    assert first.count() == MIN_RANGE

    clock.advance(LOCK + timedelta(seconds=30))
    again = queue.receive_dataframe(MIN_RANGE).localCheckpoint()

    assert again.count() == MIN_RANGE
    assert {r[0] for r in again.select("delivery_count").distinct().collect()} == {2}
    late = queue.complete_dataframe(first)  # the first holder's locks ended (S6.6)
    assert late.settled == 0 and len(late.lock_lost) == MIN_RANGE
    assert queue.complete_dataframe(again).settled == MIN_RANGE
    assert queue.counts()["total"] == 0


@pytest.mark.slow  # the default run keeps the whole-range case
def test_s5_7_batch_delete_leaves_a_held_range_and_takes_a_lapsed_one(clock, admin,
                                                                      spark) -> None:
    queue = _queue(admin, spark, "deleted", MIN_RANGE)
    held = queue.receive_dataframe(MIN_RANGE).localCheckpoint()
    assert held.count() == MIN_RANGE
    before = utcnow() + timedelta(days=1)

    assert queue.delete_messages(10 * MIN_RANGE, before) == 0  # every one locked (S5.7)
    clock.advance(LOCK + timedelta(seconds=30))

    assert queue.delete_messages(10 * MIN_RANGE, before) == MIN_RANGE
    assert queue.counts()["total"] == 0
    assert queue.complete_dataframe(held).settled == 0


@pytest.mark.slow
def test_s6_1_ranges_are_found_with_spark_where_the_driver_cannot_scan(admin, spark,
                                                                       monkeypatch) -> None:
    queue = _queue(admin, spark, "unscanned", MIN_RANGE)
    got = queue.receive_dataframe(MIN_RANGE).localCheckpoint()
    scan = queue.ledger.scan_here

    def no_main_lane(where, columns, keep):  # type: ignore[no-untyped-def]
        return None if Lane.MAIN in where.get("lane", []) else scan(where, columns, keep)

    monkeypatch.setattr(queue.ledger, "scan_here", no_main_lane)  # a lane too large to scan
    result = queue.complete_dataframe(got)

    assert (result.settled, result.lock_lost, result.already_settled) == (MIN_RANGE, [], [])
    assert queue.counts()["total"] == 0


@pytest.mark.slow  # the default run keeps the whole-range case
def test_s5_4_a_drain_of_one_large_send_reads_each_round_past_its_span(admin, spark) -> None:
    """Once every partition's cursor is in one commit, a claim reads each partition only a
    span past its cursor (decision 018); a partition whose rows all lie further on is
    still reached, by range, once the rows within the span are gone."""
    admin.create_queue("spans", enable_partitioning=True, lock_duration=LOCK)
    queue = admin.namespace.entity("spans")
    assert partition_for("a", 16) != partition_for("b", 16)
    spread, block = MIN_RANGE // 2, 2 * MIN_RANGE  # unkeyed rows first: every partition
    queue.send_dataframe(spark.range(spread + 2 * block).selectExpr(  # moves its cursor
        "CAST(id AS STRING) AS body",
        f"CASE WHEN id >= {spread + block} THEN 'b' WHEN id >= {spread} THEN 'a' END"
        " AS partition_key"))

    seen: list[int] = []
    while (got := queue.receive_dataframe(MIN_RANGE).localCheckpoint()).count():
        assert _ledger_kinds(queue).get("m", 0) == 0  # every round a range lock
        seen += [int(r[0]) for r in got.select("sequence_number").collect()]
        assert queue.complete_dataframe(got).settled == got.count()

    assert len(seen) == len(set(seen)) == spread + 2 * block
    assert queue.counts()["total"] == 0
