"""Auto-forwarding (SPEC S13, S3.3, S16.2) through real Delta tables: a forwarding step
moves messages queue to queue, subscription to queue, queue to topic, dead-letter queue to
queue; the 5th hop and a missing or disabled destination end in the source's transfer
dead-letter queue."""

from __future__ import annotations

import itertools
import json
from datetime import timedelta

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.core.properties import EntityStatus
from sbqueue.engine.forward.job import Forwarder, forward_namespace, forwarding_sources
from sbqueue.management import RuleProperties, SqlRuleFilter

pytestmark = pytest.mark.spark


def _send(root: str, spark: object, entity: str, messages: list[ServiceBusMessage]) -> None:
    with ServiceBusClient(root, spark=spark) as client:
        client.get_queue_sender(entity).send_messages(messages)


def _rows(admin: object, path: str) -> list[dict[str, object]]:
    view = admin.namespace.entity(path).messages()  # type: ignore[attr-defined]
    return [r.asDict() for r in view.orderBy("sequence_number").collect()]


@pytest.mark.slow
def test_s13_2_s3_3_forwarded_messages_keep_properties_get_new_numbers(
        admin, spark, namespace_root) -> None:
    admin.create_queue("dest", enable_partitioning=True)
    admin.create_queue("src", enable_partitioning=True, forward_to="dest")
    _send(namespace_root, spark, "src", [
        ServiceBusMessage(f"m{i}", message_id=f"id{i}", partition_key=f"key{i}",
                          subject="s", correlation_id="c", application_properties={"n": i})
        for i in range(4)])
    source = admin.namespace.entity("src")
    before = {r["message_id"]: r["sequence_number"] for r in _rows(admin, "src")}
    counts = admin.get_queue_runtime_properties("src")
    assert (counts.transfer_message_count, counts.active_message_count) == (4, 0)  # S13.2

    result = Forwarder(admin.namespace, "src").step()

    assert (result.forwarded, result.transfer_dead_lettered, result.batches) == (4, 0, 1)
    assert source.counts()["total"] == 0
    moved = _rows(admin, "dest")
    assert sorted(r["message_id"] for r in moved) == ["id0", "id1", "id2", "id3"]
    for row in moved:
        i = int(str(row["message_id"])[2:])
        assert bytes(row["body"]) == f"m{i}".encode()  # type: ignore[arg-type]
        assert (row["partition_key"], row["subject"], row["correlation_id"]) == (
            f"key{i}", "s", "c")
        assert json.loads(str(row["application_properties"])) == {"n": i}
        assert row["hop_count"] == 1
        assert row["enqueued_sequence_number"] == before[row["message_id"]]  # S3.3
        # the destination routes by the same key; its number is its own (S3.1)
        assert int(row["sequence_number"]) >> 48 == row["partition_id"]
    assert Forwarder(admin.namespace, "src").step().forwarded == 0  # nothing left


@pytest.mark.slow
def test_s13_3_the_fifth_hop_goes_to_the_transfer_dead_letter_queue(admin, spark,
                                                                     namespace_root) -> None:
    names = [f"hop{i}" for i in range(6)]
    admin.create_queue(names[-1])
    for here, there in reversed(list(itertools.pairwise(names))):
        admin.create_queue(here, forward_to=there)
    _send(namespace_root, spark, names[0], [ServiceBusMessage("far", message_id="far")])
    first = _rows(admin, names[0])[0]["sequence_number"]
    for i, name in enumerate(names[:-1]):
        result = Forwarder(admin.namespace, name).step()
        if i < 4:  # hops 1-4 are made
            assert (result.forwarded, result.transfer_dead_lettered) == (1, 0), name
        else:  # at hop4 the message would make its 5th hop
            assert (result.forwarded, result.transfer_dead_lettered) == (0, 1), name
    assert _rows(admin, names[-1]) == []
    [dead] = _rows(admin, names[4])
    assert dead["sub_queue"] == "TransferDeadLetter"
    assert dead["dead_letter_reason"] == "MaxTransferHopCountExceeded"
    assert (dead["hop_count"], dead["enqueued_sequence_number"]) == (4, first)
    assert admin.get_queue_runtime_properties(names[4]).transfer_dead_letter_message_count == 1
    with ServiceBusClient(namespace_root, spark=spark) as client, \
            client.get_queue_receiver(names[4], sub_queue="transferdeadletter",
                                      max_wait_time=5) as receiver:  # received like a queue
        got = receiver.receive_messages(1)
        assert [str(m) for m in got] == ["far"]
        receiver.complete_message(got[0])


@pytest.mark.slow
def test_s13_3_a_missing_or_disabled_destination_transfer_dead_letters(
        admin, spark, namespace_root) -> None:
    admin.create_queue("gone")
    admin.create_queue("off")
    admin.create_queue("to-gone", forward_to="gone")
    admin.create_queue("to-off", forward_to="off")
    _send(namespace_root, spark, "to-gone", [ServiceBusMessage("a")])
    _send(namespace_root, spark, "to-off", [ServiceBusMessage("b")])
    admin.delete_queue("gone")
    admin.update_queue(admin.get_queue("off"), status=EntityStatus.SEND_DISABLED)

    for source, reason in (("to-gone", "MessagingEntityNotFound"),
                           ("to-off", "MessagingEntityDisabled")):
        result = Forwarder(admin.namespace, source).step()
        assert (result.forwarded, result.transfer_dead_lettered) == (0, 1)
        [row] = _rows(admin, source)
        assert (row["sub_queue"], row["dead_letter_reason"]) == ("TransferDeadLetter", reason)
        assert "S13.3" in str(row["dead_letter_error_description"])
    assert _rows(admin, "off") == []


@pytest.mark.slow
def test_s13_1_dead_letters_and_subscriptions_forward_to_queues_and_topics(
        admin, spark, namespace_root) -> None:
    admin.create_queue("audit")
    admin.create_queue("dead", enable_partitioning=True)
    admin.create_topic("events")
    admin.create_subscription("events", "all", forward_to="audit")
    admin.create_subscription("events", "none",
                              default_rule=RuleProperties("none", SqlRuleFilter("1 = 0")))
    admin.create_queue("inbound", forward_to="events", forward_dead_lettered_messages_to="dead",
                       lock_duration=timedelta(seconds=30))
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("inbound").send_messages(
            [ServiceBusMessage("x"), ServiceBusMessage("y")])
        # a dead-lettered message of the source goes to its dead-letter destination
        with client.get_queue_receiver("inbound", max_wait_time=5) as receiver:
            got = receiver.receive_messages(1)
            receiver.dead_letter_message(got[0], reason="bad")
    assert set(forwarding_sources(admin.namespace)) == {"inbound", "events/Subscriptions/all"}

    # queues are stepped before subscriptions, so one pass carries x through the topic
    moved = forward_namespace(admin.namespace)
    assert moved["inbound"].forwarded == 2  # one to the topic, one from the DLQ to "dead"
    assert moved["events/Subscriptions/all"].forwarded == 1
    again = forward_namespace(admin.namespace, ["inbound", "events/Subscriptions/all"])
    assert all(r.batches == 0 for r in again.values())

    [audited] = _rows(admin, "audit")
    [dead] = _rows(admin, "dead")
    assert {bytes(audited["body"]), bytes(dead["body"])} == {b"x", b"y"}  # type: ignore[arg-type]
    assert audited["hop_count"] == 2  # queue -> topic -> queue
    assert dead["dead_letter_reason"] is None and dead["sub_queue"] == "Main"
    assert _rows(admin, "inbound") == [] and _rows(admin, "events/Subscriptions/none") == []
