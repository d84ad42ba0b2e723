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
