"""S5.4: a receiver with nothing to receive waits without spinning (issue 41, item 3).

``for message in receiver:`` without ``max_wait_time`` is how the SDK's samples receive:
it must wait for the next message however long, costing little while it waits, and hand a
new message over promptly."""

from __future__ import annotations

import resource
import threading
import time

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

IDLE_SECONDS = 20.0


def _cpu_seconds() -> float:
    """CPU this process (every thread of it) has used, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def test_s5_4_an_idle_iterator_waits_without_spinning_and_hands_over_promptly(
        spark, admin, namespace_root) -> None:
    from sbqueue import ServiceBusClient, ServiceBusMessage

    admin.create_queue("idle", enable_partitioning=True)
    arrived: list[tuple[float, str]] = []
    errors: list[BaseException] = []
    with ServiceBusClient(namespace_root, spark=spark) as client:
        def iterate() -> None:
            try:
                with client.get_queue_receiver("idle") as receiver:
                    for message in receiver:  # no max_wait_time: waits for ever
                        arrived.append((time.monotonic(), str(message)))
                        receiver.complete_message(message)
                        return
            except BaseException as exc:  # reported below, not lost with the thread
                errors.append(exc)

        thread = threading.Thread(target=iterate, daemon=True)
        thread.start()
        time.sleep(2.0)  # its first looks, and whatever a first receive warms up
        cpu, wall = _cpu_seconds(), time.monotonic()
        time.sleep(IDLE_SECONDS)
        busy = (_cpu_seconds() - cpu) / (time.monotonic() - wall)
        assert not errors and thread.is_alive() and not arrived
        assert busy <= 0.10, f"an idle iterator kept {busy:.0%} of a core busy"
        with client.get_queue_sender("idle") as sender:
            sender.send_messages(ServiceBusMessage("wake"))
            sent = time.monotonic()
        thread.join(30)
    assert not errors, errors
    assert [body for _, body in arrived] == ["wake"]
    waited = arrived[0][0] - sent
    assert waited <= 1.0, f"the message waited {waited:.2f} s for the idle iterator"


def test_s5_4_a_waiting_receiver_wakes_on_a_send_not_on_a_timer(tmp_path) -> None:
    """Issue 45 point 2 (decision 045): a receiver waiting on an empty queue looks again when
    a commit lands on its tables, found by its watch of their logs, and otherwise once
    every ``_LOOK_EVERY``: a wait of seconds is a handful of looks, not one every half
    second, and a message sent during it is received before the next timed look."""
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.client import receiver as receiving
    from sbqueue.management import ServiceBusAdministrationClient

    root = str(tmp_path / "ns")
    ServiceBusAdministrationClient(root).create_queue("wake", enable_partitioning=True)
    with ServiceBusClient(root) as client, client.get_queue_receiver("wake") as receiver:
        looks: list[float] = []
        fetch = receiver._fetch

        def counted(count: int) -> list:
            looks.append(time.monotonic())
            return fetch(count)
        receiver._fetch = counted  # type: ignore[method-assign]
        assert receiver.receive_messages(1, max_wait_time=0) == []  # warmed up: one look
        looks.clear()
        start = time.monotonic()
        assert receiver.receive_messages(1, max_wait_time=receiving._LOOK_EVERY + 1.5) == []
        waited = time.monotonic() - start
        assert len(looks) <= 3, f"{len(looks)} looks in an idle wait of {waited:.1f} s"

        def send_soon() -> None:
            time.sleep(0.5)
            with client.get_queue_sender("wake") as sender:
                sender.send_messages(ServiceBusMessage("now"))
        looks.clear()
        sender = threading.Thread(target=send_soon)
        start = time.monotonic()
        sender.start()
        got = receiver.receive_messages(1, max_wait_time=30)
        took = time.monotonic() - start
        sender.join()
        assert [str(m) for m in got] == ["now"]
        assert took < receiving._LOOK_EVERY, f"received after {took:.2f} s: no wake on the send"
        assert len(looks) == 2, looks  # the first, empty; the one the commit woke
        receiver.complete_message(got[0])
