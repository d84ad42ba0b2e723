"""Forwarding by window (decision 017, docs/behaviour.md S13): a step that claimed the
inbox head in one driver commit and stopped there leaves its messages visible in the
Transfer sub-queue, numbered as they will be; maintenance keeps their inbox rows; the next
step finishes the batch once its lease ran out. A window stops at a row it may not take (a
schedule not yet due), which the receive path decides."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.core.properties import EntityStatus
from sbqueue.core.subqueues import TRANSFER_VIEW_NAME
from sbqueue.engine.forward.job import Forwarder
from sbqueue.engine.maintain.job import Maintainer
from sbqueue.engine.receive.attempt import WINDOW_VERSIONS

pytestmark = pytest.mark.spark

LEASE = timedelta(minutes=5)  # longer than the test takes between claim and resume


class Stopped(Exception):
    """The step 'dies' right after the commit named."""


def _stop_after(point: str):  # type: ignore[no-untyped-def]
    def hook(name: str) -> None:
        if name == point:
            raise Stopped(name)
    return hook


def _forwarding(admin, spark, root: str, name: str,  # type: ignore[no-untyped-def]
                messages: list[ServiceBusMessage]) -> None:
    """Queue ``name`` forwarding to ``name``-dest (a lease of LEASE), holding ``messages``."""
    admin.create_queue(f"{name}-dest", enable_partitioning=True)
    admin.create_queue(name, enable_partitioning=True, forward_to=f"{name}-dest",
                       lock_duration=LEASE)
    with ServiceBusClient(root, spark=spark) as client:
        client.get_queue_sender(name).send_messages(messages)


def _view(admin: object, path: str) -> list[dict[str, object]]:
    view = admin.namespace.entity(path).messages()  # type: ignore[attr-defined]
    return [r.asDict() for r in view.orderBy("sequence_number").collect()]


@pytest.mark.slow
def test_s13_4_a_window_left_by_a_dead_step_is_shown_kept_and_finished(
        clock, admin, spark, namespace_root) -> None:
    _forwarding(admin, spark, namespace_root, "win-src",
                [ServiceBusMessage(f"b{i}", message_id=f"w{i}", partition_key=f"k{i % 3}")
                 for i in range(12)])
    before = {r["message_id"]: r["sequence_number"] for r in _view(admin, "win-src")}

    with pytest.raises(Stopped):
        Forwarder(admin.namespace, "win-src", crash=_stop_after("claimed")).step()

    # claimed, not written: every message in Transfer, under the step's token, same numbers
    claimed = _view(admin, "win-src")
    assert {r["message_id"]: r["sequence_number"] for r in claimed} == before
    assert {r["sub_queue"] for r in claimed} == {TRANSFER_VIEW_NAME}
    assert len({r["lock_token"] for r in claimed}) == 1
    assert admin.get_queue_runtime_properties("win-src").transfer_message_count == 12
    assert admin.namespace.entity("win-src-dest").counts()["total"] == 0
    # hours on, maintenance may drop what every cursor passed: not a window's rows
    later = datetime.now(timezone.utc) + timedelta(hours=3)
    Maintainer(admin.namespace, now=later, vacuum=False).run(["win-src"])
    assert len(_view(admin, "win-src")) == 12
    # a step while the lease holds leaves the batch to its owner
    assert Forwarder(admin.namespace, "win-src").step().forwarded == 0

    clock.advance(LEASE)
    result = Forwarder(admin.namespace, "win-src").step()

    assert (result.forwarded, result.resumed) == (12, 1)
    assert admin.namespace.entity("win-src").counts()["total"] == 0
    moved = _view(admin, "win-src-dest")
    assert sorted(r["message_id"] for r in moved) == sorted(before)  # each exactly once
    for row in moved:
        assert row["enqueued_sequence_number"] == before[row["message_id"]]  # S3.3
        assert row["hop_count"] == 1


@pytest.mark.slow
def test_s13_4_a_window_written_then_killed_is_not_written_twice(
        clock, admin, spark, namespace_root) -> None:
    _forwarding(admin, spark, namespace_root, "twice-src",
                [ServiceBusMessage(f"b{i}", message_id=f"t{i}") for i in range(6)])
    with pytest.raises(Stopped):
        Forwarder(admin.namespace, "twice-src", crash=_stop_after("written")).step()
    assert admin.namespace.entity("twice-src-dest").counts()["total"] == 6
    # the destination now refuses sends: what was written is released, not dead-lettered
    admin.update_queue(admin.get_queue("twice-src-dest"), status=EntityStatus.SEND_DISABLED)
    clock.advance(LEASE)
    result = Forwarder(admin.namespace, "twice-src").step()
    assert (result.resumed, result.forwarded, result.transfer_dead_lettered) == (1, 6, 0)
    ids = [r["message_id"] for r in _view(admin, "twice-src-dest")]
    assert sorted(ids) == [f"t{i}" for i in range(6)]
    assert admin.namespace.entity("twice-src").counts()["total"] == 0


@pytest.mark.slow
def test_s8_4_s13_2_a_window_stops_at_a_schedule_not_yet_due(
        clock, admin, spark, namespace_root) -> None:
    admin.create_queue("sched-dest")
    admin.create_queue("sched-src", forward_to="sched-dest")
    due = datetime.now(timezone.utc) + timedelta(minutes=10)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("sched-src")
        sender.send_messages([ServiceBusMessage(f"a{i}", message_id=f"a{i}") for i in range(3)])
        sender.schedule_messages(ServiceBusMessage("later", message_id="later"), due)
        sender.send_messages([ServiceBusMessage(f"z{i}", message_id=f"z{i}") for i in range(3)])

    result = Forwarder(admin.namespace, "sched-src").step()

    assert result.forwarded == 6
    left = _view(admin, "sched-src")
    assert [(r["message_id"], r["state"]) for r in left] == [("later", "Scheduled")]
    dest = [r["message_id"] for r in _view(admin, "sched-dest")]
    assert dest == ["a0", "a1", "a2", "z0", "z1", "z2"]  # one partition: in order
    clock.advance(timedelta(minutes=11))
    assert Forwarder(admin.namespace, "sched-src").step().forwarded == 1
    assert admin.namespace.entity("sched-src").counts()["total"] == 0


@pytest.mark.slow
def test_s13_2_partitions_without_messages_do_not_hold_the_window_back(
        admin, spark, namespace_root) -> None:
    """More commits than a claim reads at once (WINDOW_VERSIONS), all in one partition: the
    other partitions' cursors move past the commits read, so every message goes."""
    admin.create_queue("one-dest", enable_partitioning=True)
    admin.create_queue("one-src", enable_partitioning=True, forward_to="one-dest")
    sends = WINDOW_VERSIONS + 40
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("one-src")
        for i in range(sends):  # one commit each
            sender.send_messages(ServiceBusMessage(f"b{i}", partition_key="only"))

    assert Forwarder(admin.namespace, "one-src").step().forwarded == sends
    assert admin.namespace.entity("one-src").counts()["total"] == 0
    assert admin.namespace.entity("one-dest").counts()["active"] == sends
