"""Decision 011 step 3: where an entity is in a local folder, a small receive reads the
ledger slice and the inbox head on the driver (delta-rs), not with Spark: the same rows,
and no Spark job for them (S5.1, S5.5, S6.1)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.core.transitions import Lane
from sbqueue.engine.namespace import Namespace
from sbqueue.engine.receive import ledger_slice
from sbqueue.engine.receive import small as receive_small
from sbqueue.engine.receive.attempt import cursors_of

pytestmark = [pytest.mark.spark, pytest.mark.local_executor]


def _plain(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    assert rows is not None
    out = []
    for row in rows:
        out.append({k: (bytes(v) if isinstance(v, bytearray)
                        else v.toPython() if hasattr(v, "toPython") else v)
                    for k, v in row.items() if k != "targets"})
    return out


def _both(monkeypatch: pytest.MonkeyPatch, read: Any) -> tuple[Any, Any]:
    """``read()`` on the driver, then with Spark (driver reads switched off)."""
    here = read()
    monkeypatch.setenv("SBQUEUE_DRIVER_READS", "0")
    there = read()
    monkeypatch.delenv("SBQUEUE_DRIVER_READS")
    return here, there


@pytest.fixture
def busy_queue(spark: Any, admin: Any, namespace_root: str) -> Any:
    """A partitioned queue with locked, completed (a record), abandoned, deferred,
    dead-lettered, scheduled and untouched messages, and moved cursors."""
    admin.create_queue("q", enable_partitioning=True, lock_duration="PT5M")
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages([ServiceBusMessage(f"m{i}", application_properties={"i": i},
                                                partition_key=f"k{i % 5}") for i in range(14)])
        sender.schedule_messages([ServiceBusMessage("later", partition_key="k1")], later)
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        got = receiver.receive_messages(6)
        receiver.complete_message(got[0])
        receiver.abandon_message(got[1])
        receiver.defer_message(got[2])
        receiver.dead_letter_message(got[3], reason="bad")
        yield Namespace(namespace_root, spark)


def test_the_ledger_slice_read_on_the_driver_is_the_spark_read(
        monkeypatch: pytest.MonkeyPatch, busy_queue: Namespace) -> None:
    for path, lane in (("q", Lane.MAIN), ("q/$DeadLetterQueue", Lane.DEAD_LETTER)):
        entity = busy_queue.entity(path)
        a = entity.make_attempt(list(range(entity.partitions)), 50, 50, True)
        here, there = _both(monkeypatch, lambda e=entity, a=a, lane=lane:
                            ledger_slice.ledger_rows(e.ledger, a, lane, 80))
        assert _plain(here) == _plain(there)
        kinds = {r["row_type"] for r in _plain(here)}
        assert kinds >= ({"p", "c", "m"} if lane == Lane.MAIN else {"m"})


def test_the_inbox_head_read_on_the_driver_is_the_spark_read(
        monkeypatch: pytest.MonkeyPatch, busy_queue: Namespace) -> None:
    entity = busy_queue.entity("q")
    a = entity.make_attempt(list(range(entity.partitions)), 50, 50, True)
    rows = ledger_slice.ledger_rows(entity.ledger, a, Lane.MAIN, 80) or []
    cursors = cursors_of(rows, a.partitions)
    for bodies, limit in ((True, 40), (False, 40), (True, 3)):
        here, there = _both(monkeypatch, lambda bodies=bodies, limit=limit:
                            receive_small._inbox_head(entity.inbox, cursors, 0,
                                                      a.latest_version, a, limit, bodies))
        assert _plain(here) == _plain(there)
        assert len(here) == min(limit, 9)  # 14 sent + 1 scheduled, 6 passed by the cursors


def test_a_receive_reads_on_the_driver_without_spark_jobs(
        spark: Any, monkeypatch: pytest.MonkeyPatch, busy_queue: Namespace,
        spark_jobs: Any) -> None:
    entity = busy_queue.entity("q")
    _, on = spark_jobs(lambda: entity.receive_rows(1))
    monkeypatch.setenv("SBQUEUE_DRIVER_READS", "0")
    _, off = spark_jobs(lambda: entity.receive_rows(1))
    assert on <= off - 2  # the ledger top-k and the inbox head are not Spark jobs


def test_s1_6_the_size_bound_from_the_log_on_the_driver_is_sparks(
        monkeypatch: pytest.MonkeyPatch, busy_queue: Namespace) -> None:
    from sbqueue.engine.reads.view import inbox_bound

    inbox = busy_queue.entity("q").inbox
    here, there = _both(monkeypatch, lambda: inbox_bound(inbox))
    assert here == there > 0


def test_s3_4_a_sends_numbers_are_read_on_the_driver_without_spark_jobs(
        spark: Any, monkeypatch: pytest.MonkeyPatch, busy_queue: Namespace,
        spark_jobs: Any) -> None:
    entity = busy_queue.entity("q")
    sent = entity.send_dataframe(spark.createDataFrame(
        [(f"n{i}".encode(), f"k{i}") for i in range(4)], "body binary, partition_key string"))
    numbers: dict[str, list[int]] = {}
    _, on = spark_jobs(lambda: numbers.setdefault("on", entity.sequence_numbers(sent.send_id)))
    monkeypatch.setenv("SBQUEUE_DRIVER_READS", "0")
    _, off = spark_jobs(lambda: numbers.setdefault("off", entity.sequence_numbers(sent.send_id)))
    assert numbers["on"] == numbers["off"] and len(set(numbers["on"])) == 4
    assert on == 0 < off


def test_s16_2_counts_read_on_the_driver_are_the_views_without_spark_jobs(
        spark: Any, monkeypatch: pytest.MonkeyPatch, busy_queue: Namespace,
        spark_jobs: Any) -> None:
    entity = busy_queue.entity("q")
    (here, per_here), jobs = spark_jobs(lambda: (entity.counts(), entity.partition_counts()))
    monkeypatch.setenv("SBQUEUE_DRIVER_READS", "0")
    there, per_there = entity.counts(), entity.partition_counts()
    assert here == there and per_here == per_there and jobs == 0
    # 15 sent: one completed, one dead-lettered, one scheduled; the deferred one is active
    assert (here["active"], here["scheduled"], here["dead_letter"], here["total"]) == (
        12, 1, 1, 14)
    assert sum(per_here.values()) == 14 and here["size_in_bytes"] > 0


@pytest.mark.slow
def test_s10_1_s8_5_subscription_counts_on_the_driver_are_the_views(
        spark: Any, admin: Any, namespace_root: str, monkeypatch: pytest.MonkeyPatch,
        spark_jobs: Any) -> None:
    from sbqueue.management import RuleProperties, SqlRuleFilter

    admin.create_topic("t", enable_partitioning=True)
    admin.create_subscription("t", "odd", default_rule=RuleProperties(
        "odd", SqlRuleFilter("i % 2 = 1"), None))
    admin.create_subscription("t", "sessions", requires_session=True)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_topic_sender("t")
        sender.send_messages([ServiceBusMessage(f"m{i}", application_properties={"i": i})
                              for i in range(6)])  # no session id: dead-lettered (S10.1)
        sender.schedule_messages([ServiceBusMessage("later", application_properties={"i": 1})],
                                 later)  # waits at the topic (S8.5)
        receiver = client.get_subscription_receiver("t", "odd", max_wait_time=5)
        got = receiver.receive_messages(2)
        receiver.complete_message(got[0])
    namespace = Namespace(namespace_root, spark)
    # odd: 1, 3, 5, one completed; sessions: every copy without a session id, the scheduled
    # one too (its copies are made, and marked, when it is sent)
    for path, expected in (("t/Subscriptions/odd", (2, 0)), ("t/Subscriptions/sessions", (0, 7))):
        entity = namespace.entity(path)
        here, jobs = spark_jobs(entity.counts)
        monkeypatch.setenv("SBQUEUE_DRIVER_READS", "0")
        there = entity.counts()
        monkeypatch.delenv("SBQUEUE_DRIVER_READS")
        assert here == there and jobs == 0
        assert (here["active"], here["dead_letter"], here["scheduled"]) == (*expected, 0)


def test_s5_3_a_ledgers_isolation_level_is_read_on_the_driver(spark, admin, namespace_root,
                                                              monkeypatch) -> None:
    """A client's first complete asks its ledger's isolation level (decision 011's
    completion records): read from the log here, the answer Spark gives, and no Spark
    statement (a first ``SHOW TBLPROPERTIES`` cost a loaded machine 27 s)."""
    from sbqueue.store import delta

    admin.create_queue("iso", enable_partitioning=True)
    entity = Namespace(namespace_root, spark=spark).entity("iso")
    expected = delta.isolation_level(spark, entity.ledger.path)
    assert expected == "Serializable"

    def refused(*_: object) -> str:
        raise AssertionError("the isolation level was asked of Spark")

    monkeypatch.setattr(delta, "isolation_level", refused)
    assert entity.ledger.isolation_level() == expected
