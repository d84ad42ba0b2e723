"""Issue 20 point 5: ``sbqueue.aio``, written as an ``azure.servicebus.aio`` program is
(``async with``, ``async for``, awaited sends, receives, settlements, session state, the
admin client and an ``AutoLockRenewer``), run through ``asyncio.run``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sbqueue import NEXT_AVAILABLE_SESSION, ServiceBusMessage
from sbqueue.aio import AutoLockRenewer, ServiceBusClient
from sbqueue.aio.management import ServiceBusAdministrationClient

pytestmark = pytest.mark.spark


@pytest.mark.slow
def test_issue20_point5_an_asyncio_program_runs_unchanged(spark: Any,
                                                          namespace_root: str) -> None:
    async def program() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with ServiceBusAdministrationClient(namespace_root, spark=spark) as admin:
            await admin.create_queue("orders", lock_duration="PT5M")
            await admin.create_queue("carts", requires_session=True)
            seen["queues"] = sorted(q.name for q in await admin.list_queues())
        async with ServiceBusClient(namespace_root, spark=spark) as client:
            async with client.get_queue_sender("orders") as sender:
                await asyncio.gather(*(sender.send_messages(ServiceBusMessage(f"o{i}"))
                                       for i in range(8)))
            renewer = AutoLockRenewer()
            async with client.get_queue_receiver("orders", max_wait_time=2,
                                                 auto_lock_renewer=renewer) as receiver:
                got = []
                async for message in receiver:  # stops after 2 s idle
                    got.append(str(message))
                    if str(message) == "o3":
                        await receiver.defer_message(message)
                    else:
                        await receiver.complete_message(message)
                seen["orders"] = sorted(got)
                seen["peek"] = [m.state.name for m in await receiver.peek_messages(5)]
            await renewer.close()
            async with client.get_queue_sender("carts") as sender:
                await sender.send_messages([ServiceBusMessage("c", session_id="s1")])
            async with client.get_queue_receiver(
                    "carts", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5) as receiver:
                session = receiver.session
                await session.set_state(b"paid")
                seen["state"] = await session.get_state()
                [cart] = await receiver.receive_messages(1)
                await receiver.complete_message(cart)
                seen["session"] = session.session_id
        return seen

    seen = asyncio.run(program())
    assert seen["queues"] == ["carts", "orders"]
    assert seen["orders"] == [f"o{i}" for i in range(8)]
    assert seen["peek"] == ["DEFERRED"]
    assert seen["state"] == b"paid" and seen["session"] == "s1"


def test_issue20_point5_sixteen_tasks_receive_and_complete_together(
        spark: Any, namespace_root: str) -> None:
    """Many tasks awaiting receives and completes at once: every message once."""
    async def program() -> list[str]:
        admin = ServiceBusAdministrationClient(namespace_root, spark=spark)
        await admin.create_queue("q", enable_partitioning=True, lock_duration="PT5M")
        async with ServiceBusClient(namespace_root, spark=spark) as client:
            await client.get_queue_sender("q").send_messages(
                [ServiceBusMessage(f"m{i:02d}") for i in range(24)])
            done: list[str] = []

            async def worker() -> None:
                async with client.get_queue_receiver("q", max_wait_time=2) as receiver:
                    while batch := await receiver.receive_messages(1):
                        await receiver.complete_message(batch[0])
                        done.append(str(batch[0]))
            await asyncio.gather(*(worker() for _ in range(16)))
            return done

    done = asyncio.run(program())
    assert sorted(done) == [f"m{i:02d}" for i in range(24)]
