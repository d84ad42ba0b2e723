"""Duplicate detection through the client and DataFrames (S11.1-S11.4, S3.1)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage

pytestmark = pytest.mark.spark


def _queue(admin, spark, namespace_root, window: str):
    admin.create_queue("dd", enable_partitioning=True, requires_duplicate_detection=True,
                       duplicate_detection_history_time_window=window)
    client = ServiceBusClient(namespace_root, spark=spark)
    return client, Namespace(namespace_root, spark).entity("dd")


@pytest.fixture
def dd(admin, spark, namespace_root):
    """A window far longer than any test's steps take on a slow, shared machine."""
    return _queue(admin, spark, namespace_root, "PT10M")


@pytest.fixture
def short_window(admin, spark, namespace_root):
    return _queue(admin, spark, namespace_root, "PT20S")


def _ids(entity) -> list[str]:
    return sorted(r.message_id for r in entity.messages().select("message_id").collect())


@pytest.mark.slow
def test_s11_2_duplicates_in_a_batch_across_sends_and_after_completion(dd, spark) -> None:
    client, entity = dd
    with client.get_queue_sender("dd") as sender:
        sender.send_messages([ServiceBusMessage(b, message_id=i)
                              for b, i in (("1", "a"), ("2", "a"), ("3", "b"))])
        assert _ids(entity) == ["a", "b"]  # S11.2 within one batch; visible at once
        sender.send_messages(ServiceBusMessage("4", message_id="a"))  # succeeds, dropped
        entity.send_dataframe(spark.createDataFrame([("5", "b")], "body string, message_id string"))
        assert _ids(entity) == ["a", "b"]
        rows = entity.messages().select("sequence_number", "body").collect()
        assert sorted(r.body for r in rows) == [b"1", b"3"]  # the first copies
        for r in rows:  # S3.1: duplicates take no number
            assert r.sequence_number & 0xFFFF_FFFF_FFFF == 1
        with client.get_queue_receiver("dd", max_wait_time=5) as receiver:
            got = receiver.receive_messages(10)
            assert sorted(str(m) for m in got) == ["1", "3"]
            for m in got:
                receiver.complete_message(m)
            sender.send_messages(ServiceBusMessage("6", message_id="a"))  # after completion
            assert receiver.receive_messages(10, max_wait_time=1) == []


def test_s11_3_s11_4_scheduled_and_immediate_and_mixed_keys(dd) -> None:
    client, entity = dd
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with client.get_queue_sender("dd") as sender:
        sender.schedule_messages(ServiceBusMessage("s", message_id="c"), later)
        sender.send_messages(ServiceBusMessage("now", message_id="c"))  # S11.3: dropped
        assert [r.state for r in entity.messages().collect()] == ["Scheduled"]
        # S11.4 [decided]: a batch with mixed keys is accepted on a partitioned entity
        sender.send_messages([ServiceBusMessage("k", message_id=f"m{i}", partition_key=f"k{i}")
                              for i in range(4)])
        assert _ids(entity) == ["c", "m0", "m1", "m2", "m3"]


def test_s11_1_a_copy_after_the_window_is_accepted(clock, short_window) -> None:
    client, entity = short_window
    with client.get_queue_sender("dd") as sender:
        sender.send_messages(ServiceBusMessage("first", message_id="w"))
        clock.advance(21)  # past the 20 s window
        sender.send_messages(ServiceBusMessage("second", message_id="w"))
    assert _ids(entity) == ["w", "w"]
    with client.get_queue_receiver("dd", max_wait_time=5) as receiver:
        got = receiver.receive_messages(10)
        assert sorted(str(m) for m in got) == ["first", "second"]


@pytest.mark.parametrize("executor", ["local", "spark"])
def test_s11_2_a_receive_leaves_duplicates_out_on_either_executor(
        executor, admin, spark, namespace_root, monkeypatch, spark_jobs) -> None:
    """Duplicates within a batch, across sends and across partition keys' partitions are
    left out alike by both executors; on the local one without a Spark job (the soak's
    receivers waited minutes for Spark's on a loaded machine)."""
    monkeypatch.setenv("SBQUEUE_EXECUTOR", executor)
    client, _ = _queue(admin, spark, namespace_root, "PT10M")
    with client.get_queue_sender("dd") as sender:
        sender.send_messages([ServiceBusMessage(b, message_id=i, partition_key=k) for b, i, k in
                              (("1", "a", "x"), ("2", "a", "x"), ("3", "b", "x"))])
        sender.send_messages([ServiceBusMessage("4", message_id="b", partition_key="x"),
                              ServiceBusMessage("5", message_id="b", partition_key="y")])
    with client.get_queue_receiver("dd", max_wait_time=5) as receiver:
        got, jobs = spark_jobs(lambda: receiver.receive_messages(10))
        while more := receiver.receive_messages(10, max_wait_time=1):
            got += more
    # "5" is "b" under another key: another group (S11.2), kept
    assert sorted(str(m) for m in got) == ["1", "3", "5"]
    by_partition: dict[int, list[int]] = {}
    for m in got:  # S3.1: duplicates take no number
        by_partition.setdefault(m.sequence_number >> 48, []).append(m.sequence_number & 0xFFFF)
    assert all(sorted(n) == list(range(1, len(n) + 1)) for n in by_partition.values())
    assert (jobs == 0) == (executor == "local"), jobs
