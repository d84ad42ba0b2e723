"""The azure-servicebus-shaped client on real Spark + Delta (S2, S3.4, S5-S9, S16.1)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from sbqueue import (
    Namespace,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from sbqueue.exceptions import (
    InvalidOperationError,
    MessageAlreadySettled,
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
)
from sbqueue.store.delta import latest_version

pytestmark = pytest.mark.spark


@pytest.fixture
def client(spark, namespace_root):
    endpoint = namespace_root if "://" in namespace_root else f"file://{namespace_root}"
    with ServiceBusClient.from_connection_string(
            f"Endpoint={endpoint};SharedAccessKeyName=x;SharedAccessKey=y",
            spark=spark) as c:
        yield c


def _queue(admin, name: str = "q", **props) -> str:
    admin.create_queue(name, **props)
    return name


def test_s2_3_s2_5_properties_round_trip_and_broker_properties(admin, client) -> None:
    q = _queue(admin, enable_partitioning=True, default_message_time_to_live="PT1H")
    when = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
    props = {"i": 42, "f": 1.5, "b": True, "s": "x", "t": when, "n": None}
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage(
            "héllo", application_properties=props, subject="subj", correlation_id="c",
            content_type="text/plain", partition_key="k", to="t", reply_to="r",
            time_to_live=timedelta(minutes=5)))
    with client.get_queue_receiver(q, max_wait_time=5) as receiver:
        [got] = receiver.receive_messages()
        assert str(got) == "héllo" and got.body_bytes == "héllo".encode()  # S2.1
        assert got.application_properties == props  # S2.3: an int stays an int, ...
        assert type(got.application_properties["i"]) is int
        assert (got.subject, got.correlation_id, got.content_type, got.partition_key,
                got.to, got.reply_to) == ("subj", "c", "text/plain", "k", "t", "r")
        assert got.message_id and len(got.message_id) == 32  # S2.6
        # S2.5: broker properties
        assert got.sequence_number >> 48 == got.partition_id
        assert got.delivery_count == 1 and got.state == ServiceBusMessageState.ACTIVE
        assert got.enqueued_sequence_number == 0
        assert got.lock_token and got.locked_until_utc > datetime.now(timezone.utc)
        assert got.expires_at_utc - got.enqueued_time_utc == timedelta(minutes=5)  # S8.1
        assert got.time_to_live == timedelta(minutes=5)
        receiver.complete_message(got)
        with pytest.raises(MessageAlreadySettled):  # S6.6
            receiver.complete_message(got)
        assert receiver.receive_messages(max_wait_time=0) == []


@pytest.mark.slow
def test_client_and_dataframe_send_the_same_messages(admin, client, spark, namespace_root
                                                     ) -> None:
    """S4.2: the same key lands on the same partition from the client and a DataFrame."""
    q = _queue(admin, enable_partitioning=True)
    entity = Namespace(namespace_root, spark).entity(q)
    keys = [f"key-{i}" for i in range(8)]
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(f"c-{k}", partition_key=k) for k in keys])
    entity.send_dataframe(spark.createDataFrame([(f"d-{k}", k) for k in keys],
                                                "body string, partition_key string"))
    rows = entity.messages().select("body", "partition_key", "partition_id").collect()
    where = {(r.body.decode()[0], r.partition_key): r.partition_id for r in rows}
    assert all(where[("c", k)] == where[("d", k)] for k in keys)
    batch = entity.receive_dataframe(100)  # client messages received as a DataFrame
    assert batch.count() == 16
    assert entity.complete_dataframe(batch).settled == 16


def test_s5_4_max_wait_time_returns_empty_after_waiting(admin, client) -> None:
    q = _queue(admin)
    with client.get_queue_receiver(q) as receiver:
        started = time.monotonic()
        assert receiver.receive_messages(max_wait_time=3) == []
        assert time.monotonic() - started >= 3


def test_s5_5_prefetch_keeps_locked_messages_for_the_next_calls(admin, client) -> None:
    q = _queue(admin, lock_duration="PT2M")
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(str(i)) for i in range(5)])
    with client.get_queue_receiver(q, prefetch_count=5) as receiver:
        [first] = receiver.receive_messages(1)
        peeked = receiver.peek_messages(10)
        assert len(peeked) == 5 and all(m.lock_token for m in peeked)  # all five locked
        rest = receiver.receive_messages(10, max_wait_time=0)  # from the cache
        assert sorted(str(m) for m in [first, *rest]) == [str(i) for i in range(5)]
        for message in [first, *rest]:
            receiver.complete_message(message)


def test_s5_4_without_prefetch_nothing_unreturned_is_locked(admin, client) -> None:
    q = _queue(admin)
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(str(i)) for i in range(5)])
    with client.get_queue_receiver(q) as receiver:
        got = receiver.receive_messages(2)
        assert len(got) == 2
        locked = [m for m in receiver.peek_messages(10) if m.lock_token]
        assert sorted(m.sequence_number for m in locked) == sorted(
            m.sequence_number for m in got)


@pytest.mark.slow
def test_s8_2_an_expired_deferred_message_is_not_received_by_number(admin, client) -> None:
    """Asked for by number, it expires then (dropped without dead-lettering on expiry:
    ``expiry_outcome``, tested without Spark in ``test_transitions``)."""
    q = _queue(admin, dead_lettering_on_message_expiration=True)
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage("late", time_to_live=timedelta(seconds=3)),
                              ServiceBusMessage("kept")])
    with client.get_queue_receiver(q, max_wait_time=5) as receiver:
        got = {str(m): m for m in receiver.receive_messages(2)}
        assert set(got) == {"late", "kept"}
        for m in got.values():
            receiver.defer_message(m)
        late, kept = got["late"].sequence_number, got["kept"].sequence_number
        time.sleep(max(0.0, (got["late"].expires_at_utc - datetime.now(timezone.utc))
                       .total_seconds()) + 0.5)
        with pytest.raises(MessageNotFoundError, match=rf"\[{late}\] expired \(S8.2\)"):
            receiver.receive_deferred_messages([late, kept])
        [back] = receiver.receive_deferred_messages([kept])  # the other one was not taken
        assert back.delivery_count == 2
        receiver.complete_message(back)
        with pytest.raises(MessageNotFoundError):
            receiver.receive_deferred_messages([late])  # it is gone from deferral
    with client.get_queue_receiver(q, sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                   max_wait_time=2) as dlq:
        dead = dlq.receive_messages(5)
        assert [(str(m), m.dead_letter_reason) for m in dead] == [
            ("late", "TTLExpiredException")]


@pytest.mark.slow
def test_s6_abandon_defer_dead_letter_and_renew(admin, client) -> None:
    q = _queue(admin, max_delivery_count=5)
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(n, message_id=n) for n in ("a", "d", "x")])
    with client.get_queue_receiver(q, max_wait_time=5) as receiver:
        got = {m.message_id: m for m in receiver.receive_messages(3)}
        old = got["a"].locked_until_utc
        assert receiver.renew_message_lock(got["a"]) >= old  # S6.5
        receiver.abandon_message(got["a"])  # S6.2: available again, one more delivery
        [again] = receiver.receive_messages()
        assert again.message_id == "a" and again.delivery_count == 2
        receiver.complete_message(again)
        receiver.defer_message(got["d"])  # S6.3
        receiver.dead_letter_message(got["x"], reason="bad", error_description="why")
        assert receiver.receive_messages(max_wait_time=1) == []  # S5.6
        seq = got["d"].sequence_number
        [deferred] = receiver.receive_deferred_messages([seq])
        assert deferred.state == ServiceBusMessageState.DEFERRED and deferred.lock_token
        assert str(deferred) == "d"
        receiver.abandon_message(deferred)  # back to Deferred [decided]
        with pytest.raises(MessageNotFoundError, match=str(seq + 99)):
            receiver.receive_deferred_messages([seq, seq + 99])  # nothing locked (S17)
        [deferred] = receiver.receive_deferred_messages(seq)
        receiver.complete_message(deferred)
    with client.get_queue_receiver(q, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        [dead] = dlq.receive_messages(max_wait_time=5)  # S7.2: received like a queue
        assert (dead.message_id, dead.dead_letter_reason,
                dead.dead_letter_error_description) == ("x", "bad", "why")
        with pytest.raises(InvalidOperationError, match=r"S7.2"):
            dlq.dead_letter_message(dead)
        dlq.complete_message(dead)


def test_s6_6_settling_after_the_lock_expired_is_lock_lost(clock, admin, client) -> None:
    q = _queue(admin, lock_duration="PT5S")
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("late"))
    with client.get_queue_receiver(q, max_wait_time=5) as receiver:
        [got] = receiver.receive_messages()
        # past the lock's end (a slow receive, the Spark executor's, may return it ended)
        clock.advance(max(got.locked_until_utc - clock.utcnow(), timedelta(0))
                      + timedelta(seconds=0.5))
        with pytest.raises(MessageLockLostError, match=str(got.sequence_number)):
            receiver.complete_message(got)
        [again] = receiver.receive_messages(max_wait_time=150)  # once the stored lock ends
        assert again.delivery_count == 2
        receiver.complete_message(again)


@pytest.mark.spark_target  # issue 43 point 3: >= 45 s of the lock left on the Spark executor
def test_s5_2_s6_1_receive_50_then_complete_each_keeps_every_lock(admin, client) -> None:
    """The SDK's most common pattern (issue 18): ``receive_messages(max_message_count=50)``
    with the default 60 s lock, then ``complete_message`` on each in turn. Each settlement
    is one keyed Delta commit (decision 011), so all 50 complete within the lock; with one
    guarded MERGE each, 32 of 50 were lost."""
    q = _queue(admin, enable_partitioning=True)  # default lock duration: 60 s
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage("x" * 1000) for _ in range(50)])
    with client.get_queue_receiver(q, max_wait_time=30) as receiver:
        got = receiver.receive_messages(max_message_count=50, max_wait_time=30)
        while len(got) < 50 and (more := receiver.receive_messages(50 - len(got))):
            got += more
        assert len(got) == 50
        lost = []
        for message in got:
            try:
                receiver.complete_message(message)
            except MessageLockLostError:
                lost.append(message.sequence_number)
        assert lost == []
        assert receiver.peek_messages(10) == []


def _ledger_rows(receiver, row_type: str) -> list[int]:
    entity = receiver._entity
    return sorted(int(r[0]) for r in entity.spark.read.format("delta").load(entity.ledger_path)
                  .where(f"row_type = '{row_type}'").select("sequence_number").collect())


@pytest.mark.slow
def test_s6_1_a_complete_is_a_record_every_reader_honours(
        clock, admin, client, monkeypatch) -> None:
    """Decision 011: a client's complete is one blind append of a completion record. From
    the moment it returns the message is gone from peek, counts and the SQL view; after
    its lock ran out no receive hands it out again; the next receive that commits deletes
    its ledger row, and the record itself once it is older than RECORD_KEEP."""
    from sbqueue.engine import records

    q = _queue(admin, lock_duration="PT15S")
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(str(i)) for i in range(3)])
    with client.get_queue_receiver(q, max_wait_time=10) as receiver:
        got = receiver.receive_messages(3)
        assert [str(m) for m in got] == ["0", "1", "2"]
        ledger_before = latest_version(receiver._entity.spark, receiver._entity.ledger_path)
        receiver.complete_message(got[0])
        done = got[0].sequence_number
        assert _ledger_rows(receiver, "c") == [done]  # appended: no MERGE, no DELETE
        assert done in _ledger_rows(receiver, "m")  # the row stays until a receive folds it
        assert latest_version(receiver._entity.spark, receiver._entity.ledger_path) == (
            ledger_before + 1)
        assert [str(m) for m in receiver.peek_messages(5)] == ["1", "2"]
        assert receiver._entity.counts()["active"] == 2
        # every lock ran out (on a loaded machine they may have already); the record
        # keeps the first one completed
        clock.advance(max(timedelta(0), max(m.locked_until_utc for m in got)
                          + timedelta(seconds=3) - clock.utcnow()))
        monkeypatch.setattr(records, "RECORD_KEEP", timedelta(0))
        again = receiver.receive_messages(3, max_wait_time=10)
        assert sorted(str(m) for m in again) == ["1", "2"]
        assert done not in _ledger_rows(receiver, "m") and _ledger_rows(receiver, "c") == []
        for message in again:
            receiver.complete_message(message)
        assert receiver.peek_messages(5) == []


@pytest.mark.slow
def test_s6_6_a_record_written_after_another_receiver_took_the_message_counts_for_nothing(
        admin, client, monkeypatch) -> None:
    """A record names the lock token it was written under. One that lands after the message
    was released and locked again (here: the writer's append 'outlasted' the clock margin,
    so it reads the row as it was just before its own commit) reports the lock lost and
    does not complete the message; the new holder's complete counts."""
    from sbqueue.engine.settle import apply as settle

    q = _queue(admin, lock_duration="PT1M")
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("m"))
    with client.get_queue_receiver(q, max_wait_time=10) as first, \
            client.get_queue_receiver(q, max_wait_time=10) as second:
        [old] = first.receive_messages()
        stale = (old.sequence_number, old.lock_token)
        first.abandon_message(old)
        [new] = second.receive_messages()
        assert new.sequence_number == old.sequence_number and new.lock_token != old.lock_token
        monkeypatch.setattr(settle, "CLOCK_MARGIN", timedelta(hours=1))  # always read back
        entity = second._entity
        result = entity.settle([stale], "complete", held_until=new.locked_until_utc)
        assert (result.settled, result.lock_lost) == (0, [old.sequence_number])
        assert [str(m) for m in second.peek_messages(5)] == ["m"]
        second.complete_message(new)  # read back too: its token is the row's
        assert second.peek_messages(5) == []


@pytest.mark.slow
def test_s6_1_a_record_landing_while_a_receive_decides_stops_the_re_lock(
        clock, admin, client, monkeypatch) -> None:
    """A valid completion record that lands after a receive read the ledger but before its
    MERGE took a snapshot is not a change to the message's row: the receive's guard rows
    ("no record of this lock") fail that MERGE, and the receive, reading again, finds the
    message completed instead of handing it out a second time."""
    from sbqueue.engine.ledger import Ledger

    q = _queue(admin, lock_duration="PT5S")
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("once"))
    with client.get_queue_receiver(q, max_wait_time=10) as receiver:
        [got] = receiver.receive_messages()
        entity = receiver._entity
        [row] = (entity.spark.read.format("delta").load(entity.ledger_path)
                 .where("row_type = 'm'").select("locked_until_utc").collect())
        ends = row[0].astimezone(timezone.utc)
        # the lock ran out: a receive would take the message again
        clock.advance(ends + timedelta(seconds=1) - clock.utcnow())
        merge, landed = Ledger.merge_changes, []

        def record_lands_first(ledger, *args, **kwargs):
            if not landed:  # written while the lock held, appended just now
                ledger.append_records("main", [(got.sequence_number, got.lock_token)],
                                      ends - timedelta(seconds=1), "late-landing")
                landed.append(1)
            return merge(ledger, *args, **kwargs)

        # the receive's MERGE (test_driver_commits has the same race for a driver commit)
        monkeypatch.setenv("SBQUEUE_DRIVER_COMMITS", "0")
        monkeypatch.setattr(Ledger, "merge_changes", record_lands_first)
        assert receiver.receive_messages(1, max_wait_time=3) == [] and landed
        assert receiver.peek_messages(5) == []


def test_s5_1_receive_and_delete(admin, client) -> None:
    q = _queue(admin)
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("once"))
    with client.get_queue_receiver(
            q, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=5) as r:
        [got] = r.receive_messages()
        assert str(got) == "once" and got.lock_token is None
        with pytest.raises(ValueError, match=r"S5.1"):
            r.complete_message(got)
        assert r.receive_messages(max_wait_time=0) == [] and r.peek_messages(5) == []


def test_s8_4_schedule_cancel_and_past_times(admin, client) -> None:
    q = _queue(admin, enable_partitioning=True)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with client.get_queue_sender(q) as sender:
        seqs = sender.schedule_messages(
            [ServiceBusMessage(f"s{i}", partition_key="k") for i in range(3)], later)
        assert len(seqs) == 3 and len(set(seqs)) == 3  # S3.4
        [past] = sender.schedule_messages(ServiceBusMessage("now"),
                                          datetime.now(timezone.utc) - timedelta(hours=1))
        with client.get_queue_receiver(q) as receiver:
            peeked = {m.sequence_number: m for m in receiver.peek_messages(10)}
            # S9.2: a queue's peek shows scheduled messages
            assert {peeked[s].state for s in seqs} == {ServiceBusMessageState.SCHEDULED}
            assert peeked[seqs[0]].expires_at_utc is None
            sender.cancel_scheduled_messages(seqs[:2])  # not yet passed by the cursor
            with pytest.raises(MessageNotFoundError):
                sender.cancel_scheduled_messages(seqs[0])  # cancelled already
            with pytest.raises(MessageNotFoundError):
                sender.cancel_scheduled_messages(past)  # active at once [decided]
            [got] = receiver.receive_messages(max_wait_time=5)
            assert got.sequence_number == past
            receiver.complete_message(got)
            sender.cancel_scheduled_messages(seqs[2])  # now passed: a ledger row
        with client.get_queue_receiver(q) as receiver:
            assert receiver.peek_messages(10) == []


def test_s8_4_time_to_live_of_a_scheduled_message_counts_from_activation(admin, client
                                                                        ) -> None:
    q = _queue(admin)
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    with client.get_queue_sender(q) as sender:
        sender.schedule_messages(ServiceBusMessage("x", time_to_live=timedelta(minutes=1)),
                                 later)
    with client.get_queue_receiver(q) as receiver:
        [peeked] = receiver.peek_messages()
        assert peeked.expires_at_utc == later + timedelta(minutes=1)


def test_s9_peek_locks_nothing_and_continues(admin, client) -> None:
    q = _queue(admin)
    with client.get_queue_sender(q) as sender:
        for i in range(3):
            sender.send_messages(ServiceBusMessage(str(i)))
    with client.get_queue_receiver(q) as receiver:
        entity = receiver._entity
        versions = [latest_version(entity.spark, p)
                    for p in (entity.inbox_path, entity.ledger_path)]
        first = receiver.peek_messages(2)
        second = receiver.peek_messages(2)
        assert [str(m) for m in first + second] == ["0", "1", "2"]
        assert all(m.lock_token is None for m in first + second)
        # S9.3: from a sequence number, within its partition's order
        again = receiver.peek_messages(5, sequence_number=first[1].sequence_number)
        assert [str(m) for m in again] == ["1", "2"]
        assert versions == [latest_version(entity.spark, p)  # S9.1: no commit
                            for p in (entity.inbox_path, entity.ledger_path)]
        assert len(receiver.receive_messages(3, max_wait_time=5)) == 3  # nothing was locked


def test_s16_1_status_is_enforced_and_nothing_is_lost(admin, client) -> None:
    q = _queue(admin)
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("kept"))
        admin.update_queue(admin.get_queue(q), status="SendDisabled")
        with pytest.raises(MessagingEntityDisabledError, match="SendDisabled"):
            sender.send_messages(ServiceBusMessage("refused"))
        with pytest.raises(MessagingEntityDisabledError):  # the DataFrame face too
            sender._entity.send_dataframe(sender._entity.spark.createDataFrame(
                [("df",)], "body string"))
        with client.get_queue_receiver(q, max_wait_time=5) as receiver:
            [got] = receiver.receive_messages()
            admin.update_queue(admin.get_queue(q), status="ReceiveDisabled")
            with pytest.raises(MessagingEntityDisabledError, match="ReceiveDisabled"):
                receiver.complete_message(got)
            with pytest.raises(MessagingEntityDisabledError):
                receiver.receive_messages()
            admin.update_queue(admin.get_queue(q), status="Active")
            receiver.abandon_message(got)
            [got] = receiver.receive_messages()
            assert str(got) == "kept"


def test_bad_input_is_refused_with_sbqueue_errors(admin, client) -> None:
    q = _queue(admin)
    with pytest.raises(MessagingEntityNotFoundError):
        client.get_queue_sender("nope")
    with pytest.raises(InvalidOperationError, match=r"S7.2"):
        client.get_queue_sender(f"{q}/$DeadLetterQueue")
    with client.get_queue_sender(q) as sender:
        with pytest.raises(InvalidOperationError, match=r"S2.3"):
            sender.send_messages(ServiceBusMessage("x", application_properties={"l": [1]}))
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(ServiceBusMessage(b"x" * 300_000))
        with pytest.raises(MessageSizeExceededError, match="batch"):
            sender.send_messages([ServiceBusMessage(b"x" * 200_000) for _ in range(2)])
        batch = sender.create_message_batch()
        assert batch.max_size_in_bytes == 256 * 1024
        sender.send_messages(batch)  # an empty batch sends nothing
        with pytest.raises(InvalidOperationError, match="ServiceBusMessage"):
            sender.send_messages("text")  # type: ignore[arg-type]
    with client.get_queue_receiver(q) as receiver:
        assert receiver.peek_messages(5) == []  # nothing stored by the refused sends
    # S10.2: no plain receiver on a session queue; S10.1: no send without a session id
    sessions = _queue(admin, "with-sessions", requires_session=True)
    with pytest.raises(InvalidOperationError, match=r"S10\.2"):
        client.get_queue_receiver(sessions)
    with client.get_queue_sender(sessions) as sender, pytest.raises(
            InvalidOperationError, match=r"S10\.1"):
        sender.send_messages(ServiceBusMessage("no session"))


@pytest.mark.slow
def test_s6_5_auto_lock_renewer_keeps_locks_alive_in_one_commit_each_round(admin, client
                                                                          ) -> None:
    """Issue 18: the renewer renews every due lock of a receiver in one commit (one new
    locked-until for all of them), early enough for the commit time it measured, so that
    none is lost while the work takes longer than the lock."""
    from sbqueue import AutoLockRenewer

    q = _queue(admin, lock_duration="PT10S")
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage(f"long work {i}") for i in range(6)])
    failures: list[object] = []
    with client.get_queue_receiver(q, max_wait_time=5) as receiver, AutoLockRenewer(
            on_lock_renew_failure=lambda m, e: failures.append(e)) as renewer:
        got = receiver.receive_messages(6)
        while len(got) < 6 and (more := receiver.receive_messages(6 - len(got))):
            got += more
        first = max(m.locked_until_utc for m in got)
        for message in got:
            renewer.register(receiver, message, max_lock_renewal_duration=60)
        time.sleep(25)  # longer than two locks
        assert not failures
        assert all(m.locked_until_utc > first for m in got)
        assert len({m.locked_until_utc for m in got}) == 1  # renewed together
        for message in got:
            receiver.complete_message(message)
        assert receiver.peek_messages(10) == []


def test_s16_2_runtime_properties_after_client_traffic(admin, client) -> None:
    q = _queue(admin, enable_partitioning=True)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with client.get_queue_sender(q) as sender:
        sender.send_messages([ServiceBusMessage("a" * 100), ServiceBusMessage("b" * 100)])
        sender.schedule_messages(ServiceBusMessage("c" * 100), later)
    with client.get_queue_receiver(q, max_wait_time=5) as receiver:
        got = receiver.receive_messages(1)
        receiver.dead_letter_message(got[0])
    runtime = admin.get_queue_runtime_properties(q)
    assert (runtime.active_message_count, runtime.dead_letter_message_count,
            runtime.scheduled_message_count, runtime.total_message_count) == (1, 1, 1, 3)
    assert runtime.size_in_bytes >= 300
    assert runtime.accessed_at_utc > runtime.created_at_utc


def test_s8_1_s8_2_expired_messages_are_never_delivered(clock, admin, client) -> None:
    dead = _queue(admin, "expiring-dl", dead_lettering_on_message_expiration=True,
                  default_message_time_to_live="PT2S")  # S8.1: caps a longer ttl
    dropped = _queue(admin, "expiring-drop")
    with client.get_queue_sender(dead) as sender:
        sender.send_messages(ServiceBusMessage("old", time_to_live=timedelta(hours=1)))
    with client.get_queue_sender(dropped) as sender:
        sender.send_messages(ServiceBusMessage("old", time_to_live=timedelta(seconds=1)))
    clock.advance(2.5)
    for q in (dead, dropped):
        with client.get_queue_receiver(q) as receiver:
            assert receiver.receive_messages(max_wait_time=0) == []
    with client.get_queue_receiver(dead, sub_queue="deadletter", max_wait_time=5) as dlq:
        [got] = dlq.receive_messages()
        assert got.dead_letter_reason == "TTLExpiredException"  # S7.3
        dlq.complete_message(got)
    assert admin.get_queue_runtime_properties(dropped).total_message_count == 0


def test_s1_6_a_send_past_the_entity_size_is_refused(admin, client) -> None:
    """The size read is 1 GB - 100 bytes (filling 1 GB here would take minutes): a 200-byte
    send is refused and stores nothing, a 50-byte one fits."""
    from sbqueue.core.sizes import entity_limit
    from sbqueue.exceptions import ServiceBusQuotaExceededError

    q = _queue(admin)
    with client.get_queue_sender(q) as sender:
        entity = sender._entity
        entity.quota.held = (entity_limit(1024, 1) - 100, time.monotonic())
        with pytest.raises(ServiceBusQuotaExceededError, match=r"S1\.6"):
            sender.send_messages(ServiceBusMessage(b"x" * 200))
        sender.send_messages(ServiceBusMessage(b"x" * 50))
    assert admin.get_queue_runtime_properties(q).total_message_count == 1
    assert entity_limit(1024, 16) == 16 * 1024**3


def test_s1_6_a_topic_send_past_the_topic_size_is_refused(admin, client) -> None:
    """Issue 20 point 6: a topic's sends count against its size as a queue's do (the
    size read is set just under the limit, as above)."""
    from sbqueue.core.sizes import entity_limit
    from sbqueue.exceptions import ServiceBusQuotaExceededError

    admin.create_topic("t")
    admin.create_subscription("t", "all")
    with client.get_topic_sender("t") as sender:
        topic = sender._entity
        topic.quota.held = (entity_limit(1024, 1) - 100, time.monotonic())
        with pytest.raises(ServiceBusQuotaExceededError, match=r"S1\.6"):
            sender.send_messages(ServiceBusMessage(b"x" * 200))
        sender.send_messages(ServiceBusMessage(b"x" * 50))
    props = admin.get_subscription_runtime_properties("t", "all")
    assert props.total_message_count == 1


def test_s4_3_an_unkeyed_batch_is_spread_over_the_partitions(admin, client, spark,
                                                             namespace_root) -> None:
    q = _queue(admin, enable_partitioning=True)
    with client.get_queue_sender(q) as sender:
        batch = sender.create_message_batch()
        for i in range(64):
            batch.add_message(ServiceBusMessage(str(i)))
        sender.send_messages(batch)
    spread = Namespace(namespace_root, spark).entity(q).partition_counts()
    assert sum(spread.values()) == 64 and sum(1 for n in spread.values() if n) >= 12


@pytest.mark.slow
def test_s14_2_s4_4_an_unavailable_partition(admin, client, spark, namespace_root) -> None:
    """S14.2, S4.4: a fenced partition refuses keyed sends and settlements; unkeyed sends
    and receives use the others; availability_status is Limited until it is released."""
    from sbqueue.core.routing import partition_for
    from sbqueue.exceptions import PartitionUnavailableError

    q = _queue(admin, enable_partitioning=True, lock_duration="PT5M")  # 16 completes
    down = partition_for("k", 16)
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("before", partition_key="k"))
        admin.set_partition_available(q, down, False)
        assert admin.get_queue_runtime_properties(q).availability_status.value == "Limited"
        with pytest.raises(PartitionUnavailableError, match=str(down)):
            sender.send_messages([ServiceBusMessage("a"),
                                  ServiceBusMessage("b", partition_key="k")])
        sender.send_messages([ServiceBusMessage(str(i)) for i in range(16)])  # unkeyed: elsewhere
    entity = Namespace(namespace_root, spark).entity(q)
    spread = entity.partition_counts()
    assert spread[down] == 1 and sum(spread.values()) == 17  # the refused send stored nothing
    with client.get_queue_receiver(q, max_wait_time=5) as receiver:
        got = receiver.receive_messages(100)
        assert len(got) == 16 and all(m.partition_id != down for m in got)  # the others
        for m in got:
            receiver.complete_message(m)
        admin.set_partition_available(q, down, True)
        [late] = receiver.receive_messages(10)
        assert str(late) == "before"
        admin.set_partition_available(q, down, False)
        with pytest.raises(PartitionUnavailableError):
            receiver.complete_message(late)
        admin.set_partition_available(q, down, True)
        receiver.complete_message(late)
    assert admin.get_queue_runtime_properties(q).availability_status.value == "Available"
    with pytest.raises(InvalidOperationError, match=r"S14\.2"):
        admin.set_partition_available(q, 16, False)


def test_s5_iteration_s6_7_max_delivery_count_through_the_client(admin, client) -> None:
    q = _queue(admin, max_delivery_count=2)
    with client.get_queue_sender(q) as sender:
        sender.send_messages(ServiceBusMessage("poison"))
    with client.get_queue_receiver(q, max_wait_time=5) as receiver:
        deliveries = []
        for message in receiver:  # S5: iteration stops after max_wait_time idle
            deliveries.append(message.delivery_count)
            receiver.abandon_message(message)
        assert deliveries == [1, 2]  # S6.7: never delivered more than max_delivery_count
    with client.get_queue_receiver(q, sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                   max_wait_time=5) as dlq:
        [dead] = dlq.receive_messages()
        assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
        dlq.complete_message(dead)
    with client.get_queue_receiver(
            q, sub_queue=ServiceBusSubQueue.TRANSFER_DEAD_LETTER) as tdlq:  # S7.1
        assert tdlq.receive_messages(max_wait_time=0) == [] and tdlq.peek_messages() == []


def test_s2_2_s5_4_ids_keys_and_an_early_return(admin, client) -> None:
    q = _queue(admin, enable_partitioning=True)
    with client.get_queue_sender(q) as sender:
        with pytest.raises(InvalidOperationError, match=r"S2\.2"):
            sender.send_messages(ServiceBusMessage("x", message_id="m" * 129))
        with pytest.raises(InvalidOperationError, match=r"S2\.2"):
            sender.send_messages(ServiceBusMessage("x", session_id="a", partition_key="b"))
        with pytest.raises(MessageSizeExceededError, match="header"):  # S2.4: 64 KB header
            sender.send_messages(ServiceBusMessage(
                "x", application_properties={f"p{i}": "v" * 1000 for i in range(70)}))
        sender.send_messages(ServiceBusMessage("ready"))
    with client.get_queue_receiver(q) as receiver:
        started = time.monotonic()
        [got] = receiver.receive_messages(5, max_wait_time=120)  # S5.4: returns with one
        assert time.monotonic() - started < 100 and str(got) == "ready"
        receiver.complete_message(got)
