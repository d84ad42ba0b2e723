"""Decision 011 step 4 (on by default; ``SBQUEUE_DRIVER_COMMITS=0`` turns it off): a small
receive commits by rewriting its ledger partitions on the driver (delta-rs) from the version
it read. The messages it hands out are the MERGE's (S5.1, S5.5, S6.1, S6.4), it runs no
Spark job, and a completion record that lands between its read and its commit is never
lost (S6.1)."""

from __future__ import annotations

from typing import Any

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.store import driver

pytestmark = pytest.mark.spark


@pytest.fixture
def commits_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBQUEUE_DRIVER_COMMITS", "1")


@pytest.mark.local_executor
def test_s5_s6_receives_committed_on_the_driver_deliver_each_message_once(
        spark: Any, admin: Any, namespace_root: str, commits_here: None,
        spark_jobs: Any) -> None:
    admin.create_queue("q", enable_partitioning=True, lock_duration="PT5M")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(f"m{i}", partition_key=f"k{i}") for i in range(6)])
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        first, jobs = spark_jobs(lambda: receiver.receive_messages(2))
        assert len(first) == 2 and jobs == 0
        receiver.complete_message(first[0])
        receiver.abandon_message(first[1])  # S6.4: back, delivered again first (S5.5)
        rest = receiver.receive_messages(10)
        bodies = [str(m) for m in rest]
        assert sorted(bodies) == sorted({f"m{i}" for i in range(6)} - {str(first[0])})
        again = next(m for m in rest if str(m) == str(first[1]))
        assert again.delivery_count == 2
        for m in rest:
            receiver.complete_message(m)
        assert receiver.receive_messages(5, max_wait_time=1) == []


@pytest.mark.local_executor
def test_s6_1_a_record_landing_between_read_and_rewrite_is_not_lost(
        spark: Any, admin: Any, namespace_root: str, commits_here: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    admin.create_queue("q", lock_duration="PT5M")  # one partition: the record is in scope
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages([ServiceBusMessage(f"m{i}")
                                                    for i in range(3)])
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        held = receiver.receive_messages(1)[0]
        rewrite, calls = driver.Pinned.rewrite, []

        def complete_first(pinned: driver.Pinned, *args: Any) -> None:
            calls.append(pinned.table.version())
            if len(calls) == 1:  # a complete commits after this receive read the ledger
                receiver.complete_message(held)
            rewrite(pinned, *args)

        monkeypatch.setattr(driver.Pinned, "rewrite", complete_first)
        got = receiver.receive_messages(1)
        assert len(calls) == 2 and calls[1] > calls[0]  # conflicted, read again, committed
        assert str(got[0]) != str(held)
        ledger = receiver._entity.ledger.rows().where(
            f"sequence_number = {held.sequence_number}").select("row_type").collect()
        assert [r[0] for r in ledger] in ([], ["c"], ["m", "c"])  # folded, or still recorded
        monkeypatch.setattr(driver.Pinned, "rewrite", rewrite)
        receiver.complete_message(got[0])
        rest = receiver.receive_messages(5, max_wait_time=1)
        assert [str(m) for m in rest] == sorted({"m0", "m1", "m2"} - {str(held), str(got[0])})


@pytest.mark.local_executor
def test_s6_single_settlements_commit_on_the_driver_without_spark_jobs(
        spark: Any, admin: Any, namespace_root: str, commits_here: None,
        spark_jobs: Any) -> None:
    """S6.5 renew, S6.4 abandon, S6.3 defer, S6.2 dead-letter of one message each: no Spark
    job, and each row ends where the rule says (lane, lock, delivery count, reason)."""
    admin.create_queue("q", lock_duration="PT5M")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages([ServiceBusMessage(f"m{i}")
                                                    for i in range(3)])
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        got = receiver.receive_messages(3)
        while len(got) < 3 and (more := receiver.receive_messages(3 - len(got))):
            got += more
        by_body = {str(m): m for m in got}
        before = by_body["m0"].locked_until_utc
        renewed, jobs = spark_jobs(lambda: receiver.renew_message_lock(by_body["m0"]))
        assert jobs == 0 and renewed >= before
        _, jobs = spark_jobs(lambda: receiver.defer_message(by_body["m1"]))
        assert jobs == 0
        _, jobs = spark_jobs(lambda: receiver.dead_letter_message(
            by_body["m2"], reason="bad", error_description="why"))
        assert jobs == 0
        _, jobs = spark_jobs(lambda: receiver.abandon_message(by_body["m0"]))
        assert jobs == 0
        rows = {r["sequence_number"]: r for r in receiver._entity.ledger.rows().where(
            "row_type = 'm'").collect()}
        assert rows[by_body["m1"].sequence_number]["state"] == "Deferred"
        dead = rows[by_body["m2"].sequence_number]
        assert (dead["lane"], dead["dead_letter_reason"], dead["lock_token"]) == (
            "dlq", "bad", None)
        back = rows[by_body["m0"].sequence_number]
        assert (back["lane"], back["lock_token"]) == ("main", None)
        [again] = receiver.receive_messages(1)
        assert (str(again), again.delivery_count) == ("m0", 2)  # S5.5: returned first
        receiver.complete_message(again)


@pytest.mark.local_executor
def test_s6_a_small_dataframe_settlement_commits_on_the_driver_once(
        spark: Any, admin: Any, namespace_root: str, commits_here: None, clock: Any,
        spark_jobs: Any) -> None:
    """Settling a DataFrame receive of a few messages over several partitions (decision
    021): one commit on the driver, no MERGE; the only Spark job is the collect of the
    frame's locks. Each kind ends where its rule says (S6.2-S6.4); a lock that expired and
    a message settled before are reported, not changed (S6.6)."""
    admin.create_queue("q", enable_partitioning=True, lock_duration="PT1M",
                       max_delivery_count=5)
    queue = admin.namespace.entity("q")
    queue.send_dataframe(spark.createDataFrame(
        [(f"m{i}", f"k{i}") for i in range(40)], "body string, partition_key string"))
    got = queue.receive_dataframe(40).localCheckpoint()
    assert got.count() == 40 and got.select("partition_id").distinct().count() > 4
    ordered = got.orderBy("sequence_number")
    done, jobs = spark_jobs(lambda: queue.complete_dataframe(ordered.limit(20)))
    assert (done.settled, jobs) == (20, 1)
    again = queue.complete_dataframe(ordered.limit(20))
    assert again.settled == 0 and len(again.already_settled) == 20  # S6.6
    cut = ordered.limit(20).agg({"sequence_number": "max"}).first()[0]
    rest = got.where(f"sequence_number > {cut}")
    dead, jobs = spark_jobs(lambda: queue.dead_letter_dataframe(
        rest.where("sequence_number % 2 = 0"), "bad", "why"))
    assert jobs == 1 and dead.settled == rest.where("sequence_number % 2 = 0").count()
    clock.advance(180)  # the other locks end (past the stored grace too): S6.6, lock lost
    lost = queue.abandon_dataframe(rest.where("sequence_number % 2 = 1"))
    assert lost.settled == 0 and len(lost.lock_lost) == 20 - dead.settled
    counts = queue.counts()
    assert (counts["active"], counts["dead_letter"]) == (20 - dead.settled, dead.settled)
    rows = {r["sequence_number"]: r for r in queue.ledger.rows().where(
        "row_type = 'm' AND lane = 'dlq'").collect()}
    assert {r["dead_letter_reason"] for r in rows.values()} == {"bad"}


@pytest.mark.parametrize("executor", ["local", "spark"])
def test_s6_3_s8_2_deferred_messages_fetched_by_number_on_either_executor(
        spark: Any, admin: Any, namespace_root: str, spark_jobs: Any, clock: Any,
        monkeypatch: pytest.MonkeyPatch, executor: str) -> None:
    """Fetching deferred messages by number (S6.3), and refusing an expired one (S8.2,
    dead-lettered as it is asked for), give the same on both executors; on the local one
    without a Spark job (the soak's receivers waited minutes for one on a loaded machine)."""
    from datetime import timedelta

    from sbqueue.exceptions import MessageNotFoundError

    monkeypatch.setenv("SBQUEUE_EXECUTOR", executor)
    admin.create_queue("q", enable_partitioning=True, lock_duration="PT5M",
                       dead_lettering_on_message_expiration=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(f"m{i}", partition_key=f"k{i}",
                               time_to_live=timedelta(minutes=1 if i == 2 else 60))
             for i in range(3)])
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        got = receiver.receive_messages(3)
        while len(got) < 3:
            got += receiver.receive_messages(3 - len(got))
        for m in got:
            receiver.defer_message(m)
        by_body = {str(m): m.sequence_number for m in got}
        wanted = [by_body["m1"], by_body["m0"]]
        back, jobs = spark_jobs(lambda: receiver.receive_deferred_messages(wanted))
        assert [str(m) for m in back] == sorted(["m0", "m1"], key=lambda b: by_body[b])
        assert all(m.delivery_count == 2 and m.locked_until_utc for m in back)
        for m in back:
            receiver.complete_message(m)
        assert (jobs == 0) == (executor == "local"), jobs
        clock.advance(120)  # m2's time to live has run out
        with pytest.raises(MessageNotFoundError, match=str(by_body["m2"])):
            receiver.receive_deferred_messages([by_body["m2"]])
        dead = client.get_queue_receiver("q", sub_queue="deadletter", max_wait_time=5)
        assert [str(m) for m in dead.receive_messages(5)] == ["m2"]


@pytest.mark.local_executor
def test_s6_1_a_receive_rewrites_only_the_partitions_it_changes(
        tmp_path: Any) -> None:
    """A receive's commit adds files only in the partition of the message it locks: the
    completion records of the messages completed just before, in other partitions, wait
    for a receive that writes there anyway or for ``FOLD_AT`` / ``FOLD_AGE`` (decision
    050), and a fold that would change nothing rewrites nothing (decision 044). Before,
    each receive in a loop wrote a second file, for the partition of the message
    completed before it."""
    import glob
    import json

    from sbqueue.management import ServiceBusAdministrationClient

    root = str(tmp_path / "ns")
    ServiceBusAdministrationClient(root).create_queue("q", enable_partitioning=True,
                                                      lock_duration="PT5M")
    with ServiceBusClient(root) as client, client.get_queue_receiver("q") as receiver:
        sender = client.get_queue_sender("q")
        for i in range(6):  # six messages completed, in up to six partitions
            sender.send_messages(ServiceBusMessage(f"m{i}"))
            (done,) = receiver.receive_messages(1, max_wait_time=5)
            receiver.complete_message(done)
        sender.send_messages(ServiceBusMessage("last"))
        (last,) = receiver.receive_messages(1, max_wait_time=5)
    log = sorted(glob.glob(f"{root}/entities/*/ledger/_delta_log/*.json"))[-1]
    with open(log) as f:
        adds = [json.loads(line)["add"] for line in f if '"add"' in line]
    touched = {int(a["partitionValues"]["partition_id"]) for a in adds}
    assert touched == {last.partition_id}, (touched, done.partition_id)


@pytest.mark.local_executor
def test_s6_1_a_fold_takes_the_record_with_its_row(tmp_path: Any, clock: Any) -> None:
    """Issue 45: a receive that folds a completion record deletes the record with the
    message row it completed, in one commit, instead of keeping it a minute: kept, every
    receive of that minute read each of the minute's records (a loop of 20 completes a
    second read a thousand rows a receive). Folds of a partition the receive writes
    nothing else to wait (decision 050), but for fewer than ``FOLD_AT`` records each and
    at most ``FOLD_AGE``: after twenty rounds of send, receive and complete, each partition
    holds fewer; once they are that old, one receive that finds nothing folds them all,
    and the ledger holds no message row and no record."""
    from deltalake import DeltaTable

    from sbqueue.engine.records import FOLD_AGE, FOLD_AT
    from sbqueue.management import ServiceBusAdministrationClient

    root = str(tmp_path / "ns")
    ServiceBusAdministrationClient(root).create_queue("q", enable_partitioning=True,
                                                      lock_duration="PT5M")

    def rows(ledger: str) -> list[dict[str, Any]]:
        kinds = DeltaTable(ledger).to_pyarrow_table(
            columns=["row_type", "partition_id", "sequence_number"])
        return [r for r in kinds.to_pylist() if r["row_type"] in ("c", "m")]

    with ServiceBusClient(root) as client, client.get_queue_receiver("q") as receiver, \
            client.get_queue_sender("q") as sender:
        for i in range(20):
            sender.send_messages(ServiceBusMessage(f"m{i}"))
            (done,) = receiver.receive_messages(1, max_wait_time=5)
            receiver.complete_message(done)
        ledger = receiver._entity.ledger_path
        waiting = rows(ledger)
        records = [r["partition_id"] for r in waiting if r["row_type"] == "c"]
        assert all(records.count(p) < FOLD_AT for p in records), waiting
        assert len([r for r in waiting if r["row_type"] == "m"]) == len(records), waiting
        clock.advance(FOLD_AGE.total_seconds() + 1)
        assert receiver.receive_messages(1, max_wait_time=0) == []
        assert rows(ledger) == []
