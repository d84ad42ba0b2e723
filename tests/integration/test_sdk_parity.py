"""Issue 20: SDK programs port by changing their imports (the calls written as an
azure-servicebus program writes them)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
from azure.core.exceptions import ResourceExistsError

from sbqueue import AutoLockRenewer, ServiceBusClient, ServiceBusMessage
from sbqueue.exceptions import MessageNotFoundError, OperationTimeoutError
from sbqueue.management import RuleProperties, SqlRuleFilter

pytestmark = pytest.mark.spark


def test_issue20_point1_creating_twice_is_azure_cores_resource_exists(admin) -> None:
    admin.create_queue("orders")
    try:
        admin.create_queue("orders")
    except ResourceExistsError as exc:  # what an SDK program catches
        assert "orders" in str(exc)
    else:
        pytest.fail("a second create_queue raised nothing")


def test_issue20_point3_update_rule_applies_its_filter_keyword(admin) -> None:
    """S15.1: ``update_rule(..., filter=...)`` overrides the rule's filter, as in the SDK
    (it used to keep the old one silently)."""
    admin.create_topic("t")
    admin.create_subscription("t", "s", default_rule=RuleProperties(
        "pick", SqlRuleFilter("color = 'red'")))
    rule = admin.get_rule("t", "s", "pick")
    admin.update_rule("t", "s", rule, filter=SqlRuleFilter("color = 'blue'"))
    stored = admin.get_rule("t", "s", "pick").filter
    assert isinstance(stored, SqlRuleFilter) and stored.sql_expression == "color = 'blue'"


def test_issue20_point4_received_properties_answer_bytes_keys(admin, spark,
                                                              namespace_root) -> None:
    """S2.3: an SDK program reads ``msg.application_properties.get(b"Color").decode()``
    (received keys are bytes there); here the same lookup finds the value, and str keys
    still do."""
    admin.create_queue("q")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages(ServiceBusMessage(
            "x", application_properties={"Color": "red", "Count": 3}))
        with client.get_queue_receiver("q", max_wait_time=5) as receiver:
            for msg in receiver.receive_messages(1):
                props = msg.application_properties
                assert props.get(b"Color").decode() == "red" and props[b"Count"] == 3
                assert props["Color"] == "red" and b"Count" in props
                assert sorted(props) == ["Color", "Count"]
                receiver.complete_message(msg)


def test_issue20_point3_a_timeout_past_at_commit_stores_nothing(admin, spark,
                                                                 namespace_root) -> None:
    """``timeout=`` on sends, settlements and admin calls: past it at the commit,
    OperationTimeoutError and nothing stored; in time, the call works as without it."""
    admin.create_queue("q", lock_duration="PT5M")
    with pytest.raises(OperationTimeoutError):
        admin.create_queue("late", timeout=1e-9)
    assert [q.name for q in admin.list_queues()] == ["q"]
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        with pytest.raises(OperationTimeoutError):
            sender.send_messages(ServiceBusMessage("late"), timeout=1e-9)
        with pytest.raises(ValueError, match="timeout"):
            sender.send_messages(ServiceBusMessage("bad"), timeout=-1)
        sender.send_messages(ServiceBusMessage("kept"), timeout=60)
        with client.get_queue_receiver("q", max_wait_time=5) as receiver:
            [msg] = receiver.receive_messages(5)
            assert str(msg) == "kept"
            def stored() -> object:
                [peeked] = receiver.peek_messages(1, sequence_number=msg.sequence_number)
                return peeked.locked_until_utc
            held = stored()
            with pytest.raises(OperationTimeoutError):
                receiver.renew_message_lock(msg, timeout=1e-9)
            assert stored() == held
            receiver.complete_message(msg)
            assert receiver.receive_messages(5, max_wait_time=1) == []


@pytest.mark.slow
def test_issue20_point6_a_topic_cancel_names_the_topic_numbers_and_is_all_or_nothing(
        admin, spark, namespace_root) -> None:
    """S8.4, S8.5: cancelling an already cancelled topic message beside a waiting one
    raises MessageNotFound naming the topic's number (it used to pass silently) and cancels
    nothing; the waiting one is cancelled by itself after."""
    admin.create_topic("t", enable_partitioning=True)
    for name in ("a", "b"):
        admin.create_subscription("t", name)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_topic_sender("t")
        at = datetime.now(timezone.utc) + timedelta(minutes=5)
        first, second = sender.schedule_messages(
            [ServiceBusMessage("m1"), ServiceBusMessage("m2")], at)
        sender.cancel_scheduled_messages(first)
        with pytest.raises(MessageNotFoundError, match=rf"\[{first}\] were already cancelled"):
            sender.cancel_scheduled_messages([first, second])
        assert admin.get_topic_runtime_properties("t").scheduled_message_count == 1
        sender.cancel_scheduled_messages(second)
        assert admin.get_topic_runtime_properties("t").scheduled_message_count == 0


def test_issue20_point6_a_schedule_a_cursor_passed_is_active_once_due(
        admin, spark, namespace_root, clock) -> None:
    """S8.4: a scheduled message that a receive's cursor passed while it waited (its ledger
    row says Scheduled) counts and shows as Active once its time comes, before any receive
    activates it (the view showed Scheduled until the next receive)."""
    admin.create_queue("q", enable_partitioning=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").schedule_messages(
            ServiceBusMessage("later", partition_key="k"), clock.utcnow() + timedelta(seconds=30))
        with client.get_queue_receiver("q") as receiver:
            assert receiver.receive_messages(1, max_wait_time=1) == []  # the cursor passes it
        assert admin.get_queue_runtime_properties("q").scheduled_message_count == 1
        clock.advance(31)
        props = admin.get_queue_runtime_properties("q")
        assert (props.scheduled_message_count, props.active_message_count) == (0, 1)


@pytest.mark.slow
def test_issue20_point2_delete_and_purge_messages(admin, spark, namespace_root,
                                                 clock) -> None:
    """S5.7: ``delete_messages`` removes the oldest unlocked active messages enqueued before
    the time given, up to the count; ``purge_messages`` all of them; a locked one and
    newer ones stay."""
    admin.create_queue("q", lock_duration="PT5M")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        for i in range(5):
            sender.send_messages(ServiceBusMessage(f"old-{i}"))
        cut = clock.advance(5)
        sender.send_messages([ServiceBusMessage("new-0"), ServiceBusMessage("new-1")])
        with client.get_queue_receiver("q", max_wait_time=5) as receiver:
            [held] = receiver.receive_messages(1)
            assert str(held) == "old-0"
            with pytest.raises(ValueError, match="max_message_count"):
                receiver.delete_messages(max_message_count=0)
            assert receiver.delete_messages(max_message_count=2,
                                            before_enqueued_time_utc=cut) == 2
            assert receiver.purge_messages(before_enqueued_time_utc=cut) == 2
            left = receiver.peek_messages(10, sequence_number=0)
            assert [str(m) for m in left] == ["old-0", "new-0", "new-1"]
            receiver.complete_message(held)


def test_issue20_point2_a_folder_it_may_not_write_is_an_authorization_error(
        spark, tmp_path) -> None:
    """A namespace folder this process may not write (made immutable: root bypasses file
    modes) raises the SDK's ServiceBusAuthorizationError naming the folder, and leaves
    nothing behind."""
    import subprocess

    from sbqueue.exceptions import ServiceBusAuthorizationError
    from sbqueue.management import ServiceBusAdministrationClient

    root = tmp_path / "ns"
    root.mkdir()
    if subprocess.run(["chattr", "+i", str(root)], capture_output=True).returncode != 0:
        pytest.skip("this file system cannot make a folder immutable (chattr +i)")
    try:
        with pytest.raises(ServiceBusAuthorizationError, match=str(root)):
            ServiceBusAdministrationClient(str(root), spark=spark).create_queue("q")
        assert list(root.iterdir()) == []
    finally:
        subprocess.run(["chattr", "-i", str(root)], check=True)


def test_issue20_point3_sessions_listed_by_when_their_state_was_set(
        admin, spark, namespace_root, clock) -> None:
    """S10.6: ``list_queue_sessions(state_updated_after=...)`` lists the sessions whose
    state was set after that time (the keyword used to be refused)."""
    admin.create_queue("q", requires_session=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage("x", session_id=s) for s in ("a", "b", "c")])
        with client.get_queue_receiver("q", session_id="a") as receiver:
            receiver.session.set_state(b"early")
        cut = clock.advance(10)
        clock.advance(10)
        with client.get_queue_receiver("q", session_id="b") as receiver:
            receiver.session.set_state(b"late")
        assert client.list_queue_sessions("q", state_updated_after=cut) == ["b"]
        assert client.list_queue_sessions("q") == ["a", "b", "c"]


@pytest.mark.slow
def test_issue20_point3_a_receivers_auto_lock_renewer_keeps_each_message(
        spark, admin, namespace_root) -> None:
    """S6.5: ``get_queue_receiver(..., auto_lock_renewer=renewer)`` registers every message
    it hands out, so a lock shorter than the work is kept (real time: the renewer's)."""
    # a renewal is a commit of seconds here: the renewer starts half a lock ahead
    admin.create_queue("q", lock_duration="PT15S")
    failures: list[object] = []
    with ServiceBusClient(namespace_root, spark=spark) as client, AutoLockRenewer(
            max_lock_renewal_duration=60,
            on_lock_renew_failure=lambda m, e: failures.append(e)) as renewer:
        client.get_queue_sender("q").send_messages(ServiceBusMessage("long work"))
        with client.get_queue_receiver("q", max_wait_time=10,
                                       auto_lock_renewer=renewer) as receiver:
            [got] = receiver.receive_messages()
            first = got.locked_until_utc
            time.sleep(17)  # longer than the lock: only a renewal keeps it
            assert not failures
            assert got.locked_until_utc > first
            receiver.complete_message(got)
            assert receiver.peek_messages(5) == []


def test_issue20_point4_uuid_and_timedelta_come_back_typed(admin, spark, namespace_root,
                                                           monkeypatch) -> None:
    """S2.3 (docs/behaviour.md): a ``uuid.UUID`` and a ``timedelta`` sent as property values
    are received as those types, by a client receive (both send paths: on the driver and,
    past ``SMALL_SEND`` messages, as a Spark DataFrame), by the DataFrame API through
    ``typed_properties``; the SQL view reads them as their canonical strings."""
    import uuid

    from sbqueue import Namespace, typed_properties

    ident, wait = uuid.uuid4(), timedelta(minutes=2, microseconds=5)
    props = {"id": ident, "wait": wait, "n": 7, "text": str(ident)}
    admin.create_queue("q")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages(ServiceBusMessage("driver", application_properties=props))
        monkeypatch.setattr("sbqueue.engine.send.ops.SMALL_SEND", 0)  # the next: a Spark send
        sender.send_messages(ServiceBusMessage("spark", application_properties=props))
        with client.get_queue_receiver("q", max_wait_time=5) as receiver:
            peeked = receiver.peek_messages(2)
            got = receiver.receive_messages(2, max_wait_time=5)
            assert sorted(str(m) for m in got) == ["driver", "spark"]
            for msg in [*peeked, *got]:
                back = msg.application_properties
                assert back["id"] == ident and isinstance(back["id"], uuid.UUID)
                assert back["wait"] == wait and isinstance(back["wait"], timedelta)
                assert back["text"] == str(ident) and back["n"] == 7  # a str stays a str
            for msg in got:
                receiver.abandon_message(msg)
    entity = Namespace(namespace_root, spark).entity("q")
    rows = entity.peek_dataframe(10).collect()
    assert [typed_properties(r["application_properties"])["id"] for r in rows] == [ident] * 2
    view = spark.sql(f"SELECT application_properties:id::string AS id, "
                     f"application_properties:wait::string AS wait "
                     f"FROM {Namespace(namespace_root, spark).sql_name('q')}").collect()
    assert {(r["id"], r["wait"]) for r in view} == {(str(ident), "PT120.000005S")}
