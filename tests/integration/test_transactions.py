"""Transactions (S12) through the client, on real Spark + Delta."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import functions as F

from sbqueue import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from sbqueue.engine.receive import attempt as receive_module
from sbqueue.engine.transactions.commit import TransactionPlan, commit_transaction
from sbqueue.exceptions import InvalidOperationError, MessageAlreadySettled, MessageLockLostError
from sbqueue.store.delta import latest_version

pytestmark = pytest.mark.spark


class Crash(Exception):
    pass


@pytest.fixture
def client(spark, namespace_root):
    with ServiceBusClient(namespace_root, spark=spark) as c:
        yield c


def _bodies(entity) -> list[str]:
    return sorted(bytes(r.body).decode() for r in entity.messages().collect())


def test_s12_1_s12_2_everything_in_one_commit(admin, client) -> None:
    admin.create_queue("q")
    q = client.namespace.entity("q")
    with client.get_queue_sender("q") as sender, \
            client.get_queue_receiver("q", max_wait_time=5) as receiver:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
        got = receiver.receive_messages(5)
        assert [str(m) for m in got] == [f"m{i}" for i in range(5)]
        ledger_before = latest_version(q.spark, q.ledger_path)
        when = datetime.now(timezone.utc) + timedelta(hours=1)
        with client.transaction() as tx:
            tx.complete_message(receiver, got[0])
            tx.abandon_message(receiver, got[1])
            tx.defer_message(receiver, got[2])
            tx.dead_letter_message(receiver, got[3], reason="bad", error_description="why")
            tx.renew_message_lock(receiver, got[4])
            tx.send_messages(sender, [ServiceBusMessage("t0"), ServiceBusMessage("t1")])
            scheduled = tx.schedule_messages(sender, ServiceBusMessage("later"), when)
            assert scheduled == []  # filled in when it commits
        # One ledger commit applied the settlements and published the sends (S12.2).
        assert latest_version(q.spark, q.ledger_path) == ledger_before + 1
        assert len(scheduled) == 1
        states = {bytes(r.body).decode(): (r.state, r.sub_queue, r.dead_letter_reason)
                  for r in q.messages().collect()}
        assert states == {
            "m1": ("Active", "Main", None), "m2": ("Deferred", "Main", None),
            "m3": ("Active", "DeadLetter", "bad"), "m4": ("Active", "Main", None),
            "t0": ("Active", "Main", None), "t1": ("Active", "Main", None),
            "later": ("Scheduled", "Main", None)}
        assert got[0].settled and got[4].locked_until_utc > datetime.now(timezone.utc)
        again = receiver.receive_messages(5)
        assert sorted(str(m) for m in again) == ["m1", "t0", "t1"]  # m4 is still locked
        with client.get_queue_receiver(
                "q", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5) as dlq:
            assert [str(m) for m in dlq.receive_messages(1)] == ["m3"]


def test_s12_2_an_exception_or_rollback_leaves_the_entity_as_before(admin, client) -> None:
    admin.create_queue("q")
    q = client.namespace.entity("q")
    with client.get_queue_sender("q") as sender, \
            client.get_queue_receiver("q", max_wait_time=5) as receiver:
        sender.send_messages(ServiceBusMessage("m0"))
        got = receiver.receive_messages(1)
        versions = (latest_version(q.spark, q.inbox_path), latest_version(q.spark, q.ledger_path))
        with pytest.raises(Crash), client.transaction() as tx:
            tx.complete_message(receiver, got[0])
            tx.send_messages(sender, ServiceBusMessage("t0"))
            raise Crash
        tx2 = client.transaction()
        tx2.send_messages(sender, ServiceBusMessage("t1"))
        tx2.rollback()
        assert (latest_version(q.spark, q.inbox_path),
                latest_version(q.spark, q.ledger_path)) == versions
        assert not got[0].settled
        receiver.complete_message(got[0])  # still ours, still locked
        assert _bodies(q) == []


def test_s12_3_s12_5_partition_rules_commit_nothing(admin, client) -> None:
    admin.create_queue("q", enable_partitioning=True)
    q = client.namespace.entity("q")
    inbox = latest_version(q.spark, q.inbox_path)
    with client.get_queue_sender("q") as sender:
        with pytest.raises(InvalidOperationError, match=r"S12.3"), client.transaction() as tx:
            tx.send_messages(sender, ServiceBusMessage("keyed", partition_key="a"))
            tx.send_messages(sender, ServiceBusMessage("no key"))
        with pytest.raises(InvalidOperationError, match=r"S12.3"), client.transaction() as tx:
            tx.send_messages(sender, ServiceBusMessage("a", partition_key="a"))
            tx.send_messages(sender, ServiceBusMessage("b", partition_key="b"))
        sender.send_messages([ServiceBusMessage("x", partition_key="x"),
                              ServiceBusMessage("y", partition_key="y")])
    assert latest_version(q.spark, q.inbox_path) == inbox + 1  # only the plain send
    with client.get_queue_receiver("q", max_wait_time=5) as receiver:
        got = {str(m): m for m in receiver.receive_messages(2)}
        while len(got) < 2:
            got.update({str(m): m for m in receiver.receive_messages(2)})
        with pytest.raises(InvalidOperationError, match=r"S12.5"), client.transaction() as tx:
            tx.complete_message(receiver, got["x"])
            tx.complete_message(receiver, got["y"])
        assert _bodies(q) == ["x", "y"]


def test_s12_4_at_most_100_messages(admin, client) -> None:
    admin.create_queue("q")
    with client.get_queue_sender("q") as sender, \
            pytest.raises(InvalidOperationError, match=r"S12.4"), client.transaction() as tx:
        tx.send_messages(sender, [ServiceBusMessage(str(i)) for i in range(101)])


def test_s12_2_a_lost_lock_fails_the_whole_transaction(clock, admin, client) -> None:
    admin.create_queue("q", lock_duration=timedelta(seconds=5))
    q = client.namespace.entity("q")
    with client.get_queue_sender("q") as sender, \
            client.get_queue_receiver("q", max_wait_time=5) as receiver:
        sender.send_messages(ServiceBusMessage("m0"))
        got = receiver.receive_messages(1)
        with pytest.raises(MessageLockLostError), client.transaction() as tx:
            tx.send_messages(sender, ServiceBusMessage("t0"))
            clock.advance(6)
            tx.complete_message(receiver, got[0])
    assert _bodies(q) == ["m0"]


def test_s12_2_s6_1_a_message_completed_outside_fails_the_transaction(admin, client) -> None:
    """A message its holder completed outside a pending transaction (a completion record,
    decision 011) is settled: the transaction that abandons it commits nothing and says so,
    and the message stays completed (not brought back by the abandon)."""
    admin.create_queue("q")
    q = client.namespace.entity("q")
    with client.get_queue_sender("q") as sender, \
            client.get_queue_receiver("q", max_wait_time=5) as receiver:
        sender.send_messages([ServiceBusMessage("m0"), ServiceBusMessage("m1")])
        got = receiver.receive_messages(2)
        with pytest.raises(MessageAlreadySettled, match=r"S6.6"), client.transaction() as tx:
            tx.abandon_message(receiver, got[0])
            tx.send_messages(sender, ServiceBusMessage("t0"))
            receiver.complete_message(got[0])  # a record: no MERGE, no DELETE
        assert q.ledger.rows(F.col("row_type") == "c").count() == 1
        receiver.complete_message(got[1])
    assert _bodies(q) == []


def test_s12_2_uncommitted_rows_stay_invisible_then_void(admin, client, monkeypatch) -> None:
    """Rows appended by a transaction that never commits (its process died between the
    append and the MERGE) are never seen; once it can no longer commit, receives pass them
    and reach the messages behind them."""
    admin.create_queue("q")
    q = client.namespace.entity("q")

    def die(step: str) -> None:
        if step == "before_commit":
            raise Crash

    plan = TransactionPlan(partition=0, started=datetime.now(timezone.utc),
                           sends=q.spark.createDataFrame([("ghost",)], "body string"))
    with pytest.raises(Crash):
        commit_transaction(q, plan, crash=die)
    with client.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("after"))
    assert _bodies(q) == ["after"]  # the view and peek never show the ghost
    with client.get_queue_receiver("q", max_wait_time=2) as receiver:
        assert receiver.receive_messages(1) == []  # the cursor waits: it may yet commit
        monkeypatch.setattr(receive_module, "PENDING", timedelta(seconds=1))
        got = receiver.receive_messages(5)
        assert [str(m) for m in got] == ["after"]
        assert got[0].sequence_number == 2  # the ghost's number stays reserved


def test_s12_1_session_state_and_session_messages_in_a_transaction(admin, client) -> None:
    admin.create_queue("sq", requires_session=True, enable_partitioning=True)
    with client.get_queue_sender("sq") as sender:
        sender.send_messages([ServiceBusMessage("a0", session_id="a"),
                              ServiceBusMessage("b0", session_id="b")])
    with client.get_queue_receiver("sq", session_id="a", max_wait_time=5) as receiver, \
            client.get_queue_sender("sq") as sender:
        got = receiver.receive_messages(1)
        with client.transaction() as tx:
            tx.complete_message(receiver, got[0])
            tx.set_session_state(receiver.session, b"a done")
            tx.send_messages(sender, ServiceBusMessage("a1", session_id="a"))
        assert receiver.session.get_state() == b"a done"
        assert [str(m) for m in receiver.receive_messages(1)] == ["a1"]
        with pytest.raises(InvalidOperationError, match=r"S12.3"), client.transaction() as tx:
            tx.send_messages(sender, ServiceBusMessage("a2", session_id="a"))
            tx.send_messages(sender, ServiceBusMessage("b1", session_id="b"))
