"""The maintenance step on real Delta tables (S8.2, S8.3, S16.3, decision 010): expiry,
idle deletion, segments dropped below every cursor, and busy senders and receivers that
lose nothing while it runs."""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.engine.maintain.job import Maintainer, last_use

pytestmark = pytest.mark.spark


def _later(**delta: float) -> datetime:
    return datetime.now(timezone.utc) + timedelta(**delta)


@pytest.mark.slow
def test_s8_2_s8_3_expired_messages_leave_unless_locked(
        clock, admin, spark, namespace_root) -> None:
    admin.create_queue("keep", dead_lettering_on_message_expiration=True,
                       lock_duration=timedelta(minutes=5))
    admin.create_queue("drop")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        for name in ("keep", "drop"):
            client.get_queue_sender(name).send_messages(
                [ServiceBusMessage(f"{name}{i}", time_to_live=timedelta(seconds=30))
                 for i in range(2)])
        with client.get_queue_receiver("keep", max_wait_time=5) as receiver:
            [held] = receiver.receive_messages(1)
            clock.advance(31)  # both expire; one is locked by this receiver
            reports = Maintainer(admin.namespace, vacuum=False).run(["keep", "drop"])
            assert all(r.cursor_commits >= 1 for r in reports)
            keep = admin.namespace.entity("keep").counts()
            assert (keep["dead_letter"], keep["active"]) == (1, 1)  # S8.3: the held one stays
            receiver.complete_message(held)  # still its holder's to settle
    [dead] = [r.asDict() for r in admin.namespace.entity("keep").messages().collect()]
    assert dead["dead_letter_reason"] == "TTLExpiredException"  # S8.2
    assert admin.namespace.entity("drop").counts()["total"] == 0  # dropped


@pytest.mark.slow
def test_s16_3_entities_idle_past_auto_delete_on_idle_are_deleted(admin, namespace_root
                                                                 ) -> None:
    five = timedelta(minutes=5)
    admin.create_queue("idle", auto_delete_on_idle=five)
    admin.create_queue("kept")  # never deleted (default: never)
    admin.create_topic("news", auto_delete_on_idle=timedelta(minutes=30))
    admin.create_subscription("news", "reader", auto_delete_on_idle=five)
    soon = Maintainer(admin.namespace, now=_later(minutes=1), vacuum=False).run()
    assert not any(r.deleted for r in soon)
    later = Maintainer(admin.namespace, now=_later(minutes=10), vacuum=False).run()
    assert {r.path for r in later if r.deleted} == {"idle", "news/Subscriptions/reader"}
    assert [q.name for q in admin.list_queues()] == ["kept"]
    assert admin.list_subscriptions("news") == []
    last = Maintainer(admin.namespace, now=_later(hours=1), vacuum=False).run()
    assert {r.path for r in last if r.deleted} == {"news"}


def test_s16_3_maintenance_moving_cursors_is_not_use(admin, namespace_root, spark_jobs
                                                     ) -> None:
    """Maintenance's cursor moves commit on the driver: marked as its own, they leave the
    entity's last use where the send put it (else an entity maintained often is never
    idle). The step reads the log and the ledger on the driver: its one Spark query is the
    inbox's segments (a snapshot and three jobs), against 18 jobs when all its reads were
    Spark's."""
    admin.create_queue("quiet", enable_partitioning=True)
    with ServiceBusClient(namespace_root, spark=admin.namespace.spark) as client:
        client.get_queue_sender("quiet").send_messages(ServiceBusMessage("one"))
    queue = admin.namespace.entity("quiet")
    used = last_use([queue.ledger, queue.inbox])
    assert used is not None
    [report], jobs = spark_jobs(lambda: Maintainer(admin.namespace, vacuum=False).run(["quiet"]))
    assert report.cursor_commits >= 1  # the fifteen partitions without a message moved
    assert last_use([queue.ledger, queue.inbox]) == used
    assert jobs <= 4 or os.environ.get("SBQUEUE_EXECUTOR") == "spark"  # its reads: Spark's


@pytest.mark.slow
def test_passed_segments_are_dropped_and_ingest_goes_on(admin, spark, namespace_root) -> None:
    admin.create_queue("q", enable_partitioning=True)
    admin.create_topic("t", enable_partitioning=True)
    admin.create_subscription("t", "s")
    queue, sub = admin.namespace.entity("q"), admin.namespace.entity("t/Subscriptions/s")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages([ServiceBusMessage(f"q{i}") for i in range(8)])
        client.get_topic_sender("t").send_messages([ServiceBusMessage(f"t{i}") for i in range(8)])
    for entity in (queue, sub):
        got = entity.receive_dataframe(100).localCheckpoint()
        assert entity.complete_dataframe(got).settled == 8
    # three hours on, the sends' hour is over: every segment is passed and unreferenced
    reports = Maintainer(admin.namespace, now=_later(hours=3), vacuum=False).run()
    dropped = {r.path: r.segments_dropped for r in reports}
    assert dropped["q"] >= 1 and dropped["t"] >= 1
    for path in (queue.inbox_path, sub.inbox_path):
        assert spark.read.format("delta").load(path).count() == 0
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages([ServiceBusMessage(f"n{i}") for i in range(4)])
        client.get_topic_sender("t").send_messages([ServiceBusMessage("n")])
    assert queue.receive_dataframe(100).count() == 4
    assert sub.receive_dataframe(100).count() == 1


@pytest.mark.slow
def test_maintenance_beside_busy_senders_and_receivers_loses_nothing(
        admin, spark, namespace_root) -> None:
    admin.create_queue("busy", enable_partitioning=True, lock_duration=timedelta(minutes=5))
    queue = admin.namespace.entity("busy")
    sent: list[str] = []
    received: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def send() -> None:
        batch = 0
        while not stop.is_set() and batch < 30:
            ids = [f"b{batch}-{i}" for i in range(20)]
            try:
                queue.send_dataframe(spark.createDataFrame(
                    [(i, i) for i in ids], "message_id string, body string"))
            except BaseException as exc:  # a send aborted by maintenance would land here
                errors.append(exc)
                return
            sent.extend(ids)
            batch += 1
            time.sleep(0.5)

    def receive() -> None:
        try:
            while not stop.is_set():
                got = queue.receive_dataframe(50).localCheckpoint()
                ids = [r[0] for r in got.select("message_id").collect()]
                received.extend(ids)
                settled = queue.complete_dataframe(got).settled
                if settled != len(ids):  # a 5-minute lock: every complete must hold
                    raise AssertionError(f"{settled} of {len(ids)} completes settled")
        except BaseException as exc:  # a receive or complete that failed lands here
            errors.append(exc)

    workers = [threading.Thread(target=send), threading.Thread(target=receive)]
    for worker in workers:
        worker.start()
    try:
        reports = [Maintainer(admin.namespace).maintain("busy") for _ in range(2)]
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    assert not errors, errors
    assert sum(r.cursor_commits for r in reports) >= 1
    assert received, "the receiver took nothing while maintenance ran"
    for _ in range(10):  # drain what is left
        got = queue.receive_dataframe(10_000).localCheckpoint()
        if got.count() == 0:
            break
        received.extend(r[0] for r in got.select("message_id").collect())
        queue.complete_dataframe(got)
    assert len(sent) >= 40
    assert sorted(received) == sorted(sent)  # every message once, none lost
