"""Sessions (S10) through the client and the DataFrame API, on real Spark + Delta."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pandas as pd
import pytest
from pyspark.sql import functions as F

from sbqueue import (
    NEXT_AVAILABLE_SESSION,
    AutoLockRenewer,
    Namespace,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
)
from sbqueue.core.routing import partition_for
from sbqueue.core.sequence import COUNTER_BITS
from sbqueue.exceptions import (
    InvalidOperationError,
    MessageSizeExceededError,
    OperationTimeoutError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def client(spark, namespace_root):
    with ServiceBusClient(namespace_root, spark=spark) as c:
        yield c


def _send(client, queue: str, sessions: dict[str, int]) -> None:
    """Messages of several sessions, interleaved, in one send."""
    most = max(sessions.values())
    batch = [ServiceBusMessage(f"{s}-{i}", session_id=s)
             for i in range(most) for s, n in sessions.items() if i < n]
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(batch)


@pytest.mark.slow
def test_s10_1_s4_1_session_messages_are_pinned_and_need_a_session_id(admin, client,
                                                                       spark) -> None:
    admin.create_queue("sq", requires_session=True, enable_partitioning=True)
    _send(client, "sq", {"alpha": 3, "beta": 3})
    with client.get_queue_sender("sq") as sender, pytest.raises(InvalidOperationError,
                                                                match=r"S10.1"):
        sender.send_messages(ServiceBusMessage("no session"))
    q = client.namespace.entity("sq")
    with pytest.raises(InvalidOperationError, match=r"S10.1"):
        q.send_dataframe(spark.createDataFrame([("x",)], "body string"))
    rows = q.messages().select("session_id", "sequence_number").collect()
    assert len(rows) == 6
    for r in rows:  # each session on the partition its id routes to (S4.1)
        assert r.sequence_number >> COUNTER_BITS == partition_for(r.session_id, 16)


def test_s10_2_receivers_must_match_the_queue(admin, client) -> None:
    admin.create_queue("sq", requires_session=True)
    admin.create_queue("plain")
    with pytest.raises(InvalidOperationError, match=r"requires sessions.*S10.2"):
        client.get_queue_receiver("sq")
    with pytest.raises(InvalidOperationError, match=r"does not require sessions.*S10.2"):
        client.get_queue_receiver("plain", session_id="a")
    with pytest.raises(InvalidOperationError, match=r"S10.2"):
        client.namespace.entity("sq").receive_dataframe(10)
    with pytest.raises(InvalidOperationError, match=r"S10.2"):
        client.namespace.entity("plain").receive_sessions_dataframe(1, 1)


@pytest.mark.slow
def test_s10_2_s10_3_one_holder_renew_release_and_lock_lost(clock, admin, client) -> None:
    admin.create_queue("sq", requires_session=True, enable_partitioning=True,
                       lock_duration=timedelta(seconds=5))
    _send(client, "sq", {"a": 2})
    first = client.get_queue_receiver("sq", session_id="a")
    with first:
        session = first.session
        assert session is not None and session.session_id == "a"
        with pytest.raises(SessionCannotBeLockedError, match=r"'a'.*S10.2"):
            client.get_queue_receiver("sq", session_id="a").__enter__()
        before = session.locked_until_utc
        clock.advance(1)
        assert session.renew_lock() > before
        got = first.receive_messages(1, max_wait_time=5)
        assert [str(m) for m in got] == ["a-0"]
        with pytest.raises(TypeError, match=r"renew the session"):
            first.renew_message_lock(got[0])
    # Closing released it: another receiver takes it at once and gets the unsettled
    # message again, first (S10.3, S10.4).
    with client.get_queue_receiver("sq", session_id="a") as second:
        again = second.receive_messages(2, max_wait_time=5)
        assert [str(m) for m in again] == ["a-0", "a-1"]
        assert [m.delivery_count for m in again] == [2, 1]
        clock.advance(6)  # the 5 s session lock ends
        with pytest.raises(SessionLockLostError, match=r"S10.3"):
            second.complete_message(again[0])
        with pytest.raises(SessionLockLostError):
            second.session.set_state(b"late")
        with pytest.raises(SessionLockLostError):
            second.session.renew_lock()


@pytest.mark.slow
def test_s10_3_s6_1_a_completed_session_message_stays_completed_across_renew_and_release(
        admin, client) -> None:
    """A session message's complete is a completion record (decision 011). Renewing the
    session moves its messages' locks and releasing it frees them: both fold the record
    (the message row goes) instead of moving the lock of a completed message, so the next
    holder gets only what was not completed."""
    admin.create_queue("sr", requires_session=True, lock_duration=timedelta(seconds=30))
    _send(client, "sr", {"a": 3})
    with client.get_queue_receiver("sr", session_id="a") as first:
        got = first.receive_messages(3, max_wait_time=5)
        assert [str(m) for m in got] == ["a-0", "a-1", "a-2"]
        first.complete_message(got[0])
        ledger = first._entity.ledger
        assert ledger.rows(F.col("row_type") == "c").count() == 1  # a record, no DELETE
        first.session.renew_lock()
        assert ledger.message_rows([got[0].sequence_number]).count() == 0  # folded
        first.complete_message(got[1])
    with client.get_queue_receiver("sr", session_id="a") as second:
        assert [str(m) for m in second.receive_messages(3, max_wait_time=5)] == ["a-2"]


@pytest.mark.slow
def test_s10_3_s6_1_a_release_waits_for_the_complete_in_flight(admin, client,
                                                               monkeypatch) -> None:
    """Closing a session receiver while another thread completes one of its messages: the
    release waits until the completion record has landed, then folds it, so the completed
    message never comes back (a release committed first would free the lock and void the
    record its caller was told succeeded); a complete begun after the release started
    raises SessionLockLost."""
    from sbqueue.engine.ledger import Ledger

    admin.create_queue("sw", requires_session=True, lock_duration=timedelta(seconds=60))
    _send(client, "sw", {"a": 2})
    appending, go_on = threading.Event(), threading.Event()
    append = Ledger.append_records

    def slow_append(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        appending.set()
        go_on.wait(30)
        return append(self, *args, **kwargs)

    monkeypatch.setattr(Ledger, "append_records", slow_append)
    receiver = client.get_queue_receiver("sw", session_id="a")
    got = receiver.receive_messages(2, max_wait_time=5)
    completing = threading.Thread(target=receiver.complete_message, args=(got[0],))
    completing.start()
    assert appending.wait(30)
    closing = threading.Thread(target=receiver.close)
    closing.start()
    closing.join(10)  # without the wait, a release commits in a few seconds
    assert closing.is_alive()  # the release waits for the record in flight
    with pytest.raises(SessionLockLostError):
        receiver.complete_message(got[1])  # begun after the release started
    go_on.set()
    completing.join(60)
    closing.join(60)
    assert got[0].settled
    with client.get_queue_receiver("sw", session_id="a") as second:
        assert [str(m) for m in second.receive_messages(2, max_wait_time=5)] == ["a-1"]


@pytest.mark.slow
def test_s10_2_next_available_session_then_operation_timeout(admin, client) -> None:
    admin.create_queue("sq", requires_session=True, enable_partitioning=True)
    _send(client, "sq", {"a": 1, "b": 1})
    taken = []
    with client.get_queue_receiver("sq", session_id=NEXT_AVAILABLE_SESSION,
                                   max_wait_time=5) as one, \
            client.get_queue_receiver("sq", session_id=NEXT_AVAILABLE_SESSION,
                                      max_wait_time=5) as two:
        taken = sorted([one.session.session_id, two.session.session_id])
        assert taken == ["a", "b"]
        started = time.monotonic()
        with pytest.raises(OperationTimeoutError, match=r"S10.2"):
            client.get_queue_receiver("sq", session_id=NEXT_AVAILABLE_SESSION,
                                      max_wait_time=2).__enter__()
        assert time.monotonic() - started >= 2


def test_s10_4_strict_order_within_a_session_abandoned_first(admin, client) -> None:
    admin.create_queue("sq", requires_session=True)
    _send(client, "sq", {"a": 5, "b": 5})
    with client.get_queue_receiver("sq", session_id="a", max_wait_time=5) as receiver:
        first = receiver.receive_messages(2)
        assert [str(m) for m in first] == ["a-0", "a-1"]
        receiver.abandon_message(first[0])
        rest = receiver.receive_messages(5)
        assert [str(m) for m in rest] == ["a-0", "a-2", "a-3", "a-4"]
        seqs = [m.sequence_number for m in rest]
        assert seqs == sorted(seqs)
        assert all(m.session_id == "a" for m in rest)
        peeked = receiver.peek_messages(10)  # a session receiver peeks its session only
        assert {m.session_id for m in peeked} == {"a"}


@pytest.mark.slow
def test_s10_5_s10_6_state_outlives_the_messages_and_sessions_are_listed(admin,
                                                                         client) -> None:
    admin.create_queue("sq", requires_session=True, enable_partitioning=True)
    _send(client, "sq", {"a": 1, "b": 1})
    assert sorted(client.list_queue_sessions("sq")) == ["a", "b"]  # S10.6
    with client.get_queue_receiver("sq", session_id="a", max_wait_time=5) as receiver:
        session = receiver.session
        assert session.get_state() is None
        session.set_state("step 1")
        assert session.get_state() == b"step 1"
        with pytest.raises(MessageSizeExceededError, match=r"S10.5"):
            session.set_state(b"x" * (256 * 1024 + 1))
        for message in receiver.receive_messages(1):
            receiver.complete_message(message)
        session.set_state(b"\x00done")
    with client.get_queue_receiver("sq", session_id="a") as later:
        assert later.session.get_state() == b"\x00done"  # no message left, state stays
    assert sorted(client.list_queue_sessions("sq")) == ["a", "b"]  # a: state, b: messages
    states = client.namespace.entity("sq").session_states().where("state IS NOT NULL")
    assert [(r.session_id, bytes(r.state)) for r in states.collect()] == [("a", b"\x00done")]


@pytest.mark.slow
def test_s10_3_auto_lock_renewer_keeps_a_session(admin, client) -> None:
    # A renewal is a few Spark jobs (seconds here): the renewer starts half a lock ahead.
    admin.create_queue("sq", requires_session=True, lock_duration=timedelta(seconds=20))
    _send(client, "sq", {"a": 2})
    failures: list[object] = []
    with client.get_queue_receiver("sq", session_id="a", max_wait_time=5) as receiver, \
            AutoLockRenewer(on_lock_renew_failure=lambda t, e: failures.append(e)) as renewer:
        renewer.register(receiver, receiver.session, max_lock_renewal_duration=60)
        message = receiver.receive_messages(1)[0]
        time.sleep(25)  # past the first lock's end
        receiver.complete_message(message)  # the message lock moved with the session's
        assert [str(m) for m in receiver.receive_messages(1)] == ["a-1"]
    assert failures == []


@pytest.mark.slow
def test_s10_dataframe_session_job_in_order_with_state(admin, client, spark) -> None:
    admin.create_queue("sq", requires_session=True, enable_partitioning=True)
    _send(client, "sq", {"a": 4, "b": 3, "c": 2})
    q = Namespace(client.namespace.root, spark).entity("sq")
    batch = q.receive_sessions_dataframe(max_sessions=2, max_messages_per_session=10)
    batch = batch.localCheckpoint()

    def in_order(pdf: pd.DataFrame) -> pd.DataFrame:
        ordered = pdf.sort_values("sequence_number")
        return pd.DataFrame({"session_id": [ordered.session_id.iloc[0]],
                             "bodies": [",".join(b.decode() for b in ordered.body)]})

    done = batch.groupBy("session_id").applyInPandas(
        in_order, "session_id string, bodies string").collect()
    assert len(done) == 2
    for row in done:
        n = {"a": 4, "b": 3, "c": 2}[row.session_id]
        assert row.bodies == ",".join(f"{row.session_id}-{i}" for i in range(n))
    assert q.complete_dataframe(batch).settled == sum(
        {"a": 4, "b": 3, "c": 2}[r.session_id] for r in done)
    states = batch.select("session_id", "session_lock_token").distinct().withColumn(
        "state", F.encode(F.lit("seen"), "UTF-8"))
    assert sorted(q.set_session_states(states).set) == sorted(r.session_id for r in done)
    q.release_sessions(batch)
    left = q.receive_sessions_dataframe(max_sessions=5, max_messages_per_session=10)
    assert {r.session_id for r in left.collect()} == {"a", "b", "c"} - {
        r.session_id for r in done}


@pytest.mark.slow
def test_s10_worker_pool_takes_every_message_once_in_order(admin, client) -> None:
    """10 sessions x 20 messages, 5 threads taking NEXT_AVAILABLE_SESSION until none is
    left (OperationTimeout): each message received once, in order within its session."""
    admin.create_queue("pool", requires_session=True, enable_partitioning=True)
    sessions = {f"s{i}": 20 for i in range(10)}
    _send(client, "pool", sessions)
    got: dict[str, list[str]] = {s: [] for s in sessions}
    timeouts: list[int] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def worker(n: int) -> None:
        try:
            while True:
                try:
                    receiver = client.get_queue_receiver(
                        "pool", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=3,
                        receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE)
                    receiver.__enter__()
                except OperationTimeoutError:
                    with guard:
                        timeouts.append(n)
                    return
                with receiver:
                    sid = receiver.session.session_id
                    while batch := receiver.receive_messages(10, max_wait_time=1):
                        with guard:
                            got[sid] += [str(m) for m in batch]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    assert not errors, errors
    assert sorted(timeouts) == list(range(5))
    for sid, bodies in got.items():
        assert bodies == [f"{sid}-{i}" for i in range(20)], sid
