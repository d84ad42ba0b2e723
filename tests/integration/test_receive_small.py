"""Decision 011 step 2b: a small receive is decided on the driver with the same rules as
the Spark projection. The picking is compared with the Spark ``_pick`` on random candidate
sets; a client receive takes the driver path and reads no body after its commit."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from sbqueue.core.picking import pick
from sbqueue.core.transitions import Lane, ReceiveContext, deliverable
from sbqueue.engine.receive import on_spark as spark_receive
from sbqueue.engine.receive.attempt import Attempt

pytestmark = pytest.mark.spark

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
CTX = ReceiveContext(now=NOW, locked_until=NOW + timedelta(seconds=60), peek_lock=True,
                     max_delivery_count=3, dead_letter_on_expiry=False, main_queue=True)
SCHEMA = ("partition_id int, sequence_number long, origin string, lane string, state string, "
          "delivery_count int, lock_token string, locked_until_utc timestamp, "
          "expires_at_utc timestamp, scheduled_enqueue_time_utc timestamp, "
          "_record_at timestamp, _pending boolean, _void boolean, session_id string")
MARKS = ("_picked", "_passed", "_left", "_cursor_to")


def candidates(rng: random.Random) -> list[dict]:
    rows = []
    for partition in range(rng.randint(1, 4)):
        for counter in range(1, rng.randint(1, 9)):
            origin = rng.choice(["inbox", "inbox", "ledger"])
            soon, past = NOW + timedelta(seconds=20), NOW - timedelta(seconds=5)
            rows.append({
                "partition_id": partition, "sequence_number": (partition << 48) + counter,
                "origin": origin, "lane": Lane.MAIN if origin == "ledger" else None,
                "state": rng.choice(["Active", "Active", "Deferred"]),
                "delivery_count": rng.choice([0, 1, 3]),
                "lock_token": rng.choice([None, "t"]),
                "locked_until_utc": rng.choice([None, soon, past]),
                "expires_at_utc": rng.choice([None, None, past]),
                "scheduled_enqueue_time_utc": rng.choice([None, None, soon]),
                "_record_at": None, "_pending": rng.random() < 0.1,
                "_void": rng.random() < 0.1,
                "session_id": rng.choice([None, "a", "b", "c"])})
    return rows


@pytest.mark.parametrize("seed", range(8))
def test_driver_picking_matches_the_spark_projection(spark, seed: int) -> None:
    rng = random.Random(seed)
    rows = candidates(rng)
    partitions = sorted({r["partition_id"] for r in rows})
    share, total = rng.choice([(1, 1), (2, 3), (5, 5), (1, 4)])
    sessions = [(), (), ("a",), ("a", "c")][seed % 4]  # S10.4: a share of each session
    attempt = Attempt(partitions=partitions, share=share, total=total, ctx=CTX,
                      lock_duration=timedelta(seconds=60), latest_version=0,
                      sessions=sessions)
    df = spark.createDataFrame([tuple(r[c.split()[0]] for c in SCHEMA.split(", "))
                                for r in rows], SCHEMA)
    random.seed(seed)
    decided = spark_receive._pick(df, attempt).collect()
    rotation = random.Random(seed).randrange(1 << 16)
    pick(rows, deliverable(CTX), share, total, len(partitions), rotation,
         sessions=frozenset(sessions))
    expected = {r["sequence_number"]: tuple(r[m] for m in MARKS) for r in decided}
    assert {r["sequence_number"]: tuple(r[m] for m in MARKS) for r in rows} == expected


def test_a_client_receive_is_decided_on_the_driver_with_its_body(spark, admin, namespace_root,
                                                                  monkeypatch) -> None:
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.engine.receive import ops as receive_ops

    admin.create_queue("q")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(f"m{i}", application_properties={"i": i}) for i in range(3)])
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        seen = []
        original = receive_ops.receive_leased

        def spy(*args, **kwargs):  # the engine's result, to see which path decided
            result = original(*args, **kwargs)
            seen.append(result)
            return result

        monkeypatch.setattr(receive_ops, "receive_leased", spy)
        got = receiver.receive_messages(2)
        bodies = [str(m) for m in got]
        assert len(bodies) == 2 and set(bodies) < {"m0", "m1", "m2"}
        assert [m.application_properties["i"] for m in got] == [int(b[1]) for b in bodies]
        assert seen[0].messages is not None and len(seen[0].messages) == 2
        for m in got:
            assert m.locked_until_utc is not None and m.delivery_count == 1
            receiver.complete_message(m)
        rest = {"m0", "m1", "m2"} - set(bodies)
        assert [str(m) for m in receiver.receive_messages(5)] == sorted(rest)


def test_s6_1_the_next_receive_folds_a_completed_message_still_locked(spark, admin,
                                                                       namespace_root) -> None:
    """A complete is a record (decision 011); the next small receive deletes the message's
    row in its own commit although the row is locked and was never read (a fold)."""
    from sbqueue import ServiceBusClient, ServiceBusMessage

    admin.create_queue("q", lock_duration="PT2M")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages([ServiceBusMessage(f"m{i}")
                                                     for i in range(2)])
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        [first] = receiver.receive_messages(1)
        receiver.complete_message(first)
        ledger = receiver._entity.ledger_path

        def rows(kind: str) -> list[int]:
            return [int(r[0]) for r in spark.read.format("delta").load(ledger)
                    .where(f"row_type = '{kind}'").select("sequence_number").collect()]

        assert first.sequence_number in rows("m") and first.sequence_number in rows("c")
        [second] = receiver.receive_messages(1)
        assert second.sequence_number != first.sequence_number
        assert first.sequence_number not in rows("m")  # folded, its lock still running
        receiver.complete_message(second)


@pytest.mark.local_executor
def test_a_receive_that_changes_nothing_commits_nothing(spark, admin, namespace_root,
                                                       clock) -> None:
    """A receive that finds nothing to hand out or move, and no record to fold, commits
    nothing (before, a record kept a minute after its fold was folded again by each
    receive of that minute, each commit a no-op, and a maintenance step made 64 such
    commits; on the driver the fold now takes the record too, decision 049). A young
    record of a partition the receive writes nothing else to waits (decision 050): no
    commit either, until it is ``FOLD_AGE`` old."""
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.engine.records import FOLD_AGE
    from sbqueue.store.delta import latest_version

    admin.create_queue("q", lock_duration="PT2M")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages(ServiceBusMessage("only"))
        receiver = client.get_queue_receiver("q", max_wait_time=0)
        [message] = receiver.receive_messages(1, max_wait_time=5)
        receiver.complete_message(message)
        ledger = receiver._entity.ledger_path
        completed = latest_version(spark, ledger)
        assert receiver.receive_messages(1) == []  # the record is young: it waits
        assert latest_version(spark, ledger) == completed
        clock.advance(FOLD_AGE.total_seconds() + 1)
        assert receiver.receive_messages(1) == []  # folds the record: one commit
        folded = latest_version(spark, ledger)
        assert folded == completed + 1
        assert receiver.receive_messages(1) == []
        assert receiver.receive_messages(1) == []
        assert latest_version(spark, ledger) == folded


def test_s5_s6_threads_of_one_process_share_receive_and_complete_commits(
        spark, admin, namespace_root) -> None:
    """Four threads receive one and complete it in a loop: every message is handed out
    once and completed once, and nothing is left (the group commit carries their calls)."""
    import threading

    from sbqueue import ServiceBusClient, ServiceBusMessage

    admin.create_queue("q", enable_partitioning=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages([ServiceBusMessage(f"m{i}")
                                                     for i in range(24)])
        got: list[str] = []
        lock = threading.Lock()

        def worker() -> None:
            with client.get_queue_receiver("q", max_wait_time=3) as receiver:
                for message in receiver:
                    receiver.complete_message(message)
                    with lock:
                        got.append(str(message))

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert sorted(got) == sorted(f"m{i}" for i in range(24))
        with client.get_queue_receiver("q", max_wait_time=1) as receiver:
            assert receiver.receive_messages(5) == []


def test_s10_4_a_session_receive_is_decided_on_the_driver_in_order(spark, admin,
                                                                   namespace_root,
                                                                   monkeypatch) -> None:
    """A client's session receive takes the driver path too: its messages come with their
    bodies from the head it read, in sequence order, only the session's; the other
    session's messages the cursor passed stay available to that session."""
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.engine.sessions.ops import Sessions

    seen = []
    original = Sessions.receive_result

    def spy(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        seen.append(result)
        return result

    monkeypatch.setattr(Sessions, "receive_result", spy)
    admin.create_queue("sq", requires_session=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("sq").send_messages(
            [ServiceBusMessage(f"{s}{i}", session_id=s) for i in range(3) for s in "ab"])
        with client.get_queue_receiver("sq", session_id="b", max_wait_time=5) as b:
            got = b.receive_messages(2)
            assert [str(m) for m in got] == ["b0", "b1"]
            assert seen[-1].messages is not None  # decided on the driver, bodies read once
            for m in got:
                b.complete_message(m)
        with client.get_queue_receiver("sq", session_id="a", max_wait_time=5) as a:
            assert [str(m) for m in a.receive_messages(5)] == ["a0", "a1", "a2"]


def test_s3_1_a_new_queue_has_no_cursor_rows_and_numbers_from_one(spark, admin,
                                                                   namespace_root) -> None:
    """create_queue commits the ledger once, with no rows (decision 011): a partition
    without a p row has passed nothing, so the view, the first receive (on the driver and
    in Spark) and the numbers of a schedule all count from 1 (S3.1), and the first cursor
    move inserts the p row."""
    from sbqueue import ServiceBusClient, ServiceBusMessage

    admin.create_queue("q", enable_partitioning=True)
    admin.create_queue("bulk")
    q = admin.namespace.entity("q")
    assert spark.read.format("delta").load(q.ledger_path).count() == 0
    assert [r[0] for r in spark.sql(f"DESCRIBE HISTORY delta.`{q.ledger_path}`")
            .select("version").collect()] == [0]
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages(ServiceBusMessage("a", partition_key="k"))
        [scheduled] = sender.schedule_messages(ServiceBusMessage("b", partition_key="k"), later)
        partition = scheduled >> 48
        assert scheduled == (partition << 48) + 2  # S3.4, numbered before any cursor row
        seen = {r[0]: r[1] for r in q.messages().select("message_id", "sequence_number")
                .collect()}
        assert sorted(seen.values()) == [(partition << 48) + 1, scheduled]
        [got] = client.get_queue_receiver("q", max_wait_time=5).receive_messages(1)
        assert got.sequence_number == (partition << 48) + 1 and str(got) == "a"
        cursors = (spark.read.format("delta").load(q.ledger_path).where("row_type = 'p'")
                   .select("partition_id", "last_counter").collect())
        assert [(r[0], r[1]) for r in cursors if r[0] == partition] == [(partition, 1)]
        bulk = client.get_queue_sender("bulk")
        bulk.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
        entity = admin.namespace.entity("bulk")  # a bulk receive: the Spark path
        taken = entity.receive_dataframe(500).select("sequence_number").collect()
        assert sorted(r[0] for r in taken) == [1, 2, 3]
