"""The demo job: a partitioned queue, a few thousand messages through DataFrames, then a
tour of the client on a small queue.

Used by ``sbqueue demo`` and ``jobs/demo.py``; it grows as features land.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta

from sbqueue.client import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from sbqueue.core.clock import utcnow
from sbqueue.engine import Namespace
from sbqueue.management import ServiceBusAdministrationClient

__all__ = ["DemoReport", "client_tour", "run_demo"]


@dataclass
class DemoReport:
    namespace: str
    queue: str
    sent: int = 0
    received: int = 0
    completed: int = 0
    batches: int = 0
    per_partition_sent: dict[int, int] = field(default_factory=dict)
    per_partition_received: dict[int, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    remaining: dict[str, int] = field(default_factory=dict)
    client_steps: list[str] = field(default_factory=list)


def run_demo(namespace: str, messages: int = 3000, batch: int = 1000,
             queue: str = "demo-orders") -> DemoReport:
    """Create a partitioned queue, send ``messages``, receive and complete them all."""
    report = DemoReport(namespace=namespace, queue=queue)
    clock = time.perf_counter()
    admin = ServiceBusAdministrationClient(namespace)
    ns: Namespace = admin.namespace
    spark = ns.spark
    report.timings["session_and_namespace_s"] = time.perf_counter() - clock

    start = time.perf_counter()
    if ns.catalog.queue_exists(queue):
        admin.delete_queue(queue)
    admin.create_queue(queue, enable_partitioning=True, max_delivery_count=5)
    report.timings["create_queue_s"] = time.perf_counter() - start

    entity = ns.entity(queue)
    df = spark.range(messages).selectExpr(
        "concat('order-', id) AS body",
        "IF(id % 4 = 0, concat('customer-', id % 25), NULL) AS session_id",
        "named_struct('amount', id * 3, 'express', id % 10 = 0) AS application_properties",
    )
    start = time.perf_counter()
    report.sent = entity.send_dataframe(df).count
    report.timings["send_s"] = time.perf_counter() - start

    start = time.perf_counter()
    report.per_partition_sent = entity.partition_counts()  # a read: nothing is committed
    report.timings["count_s"] = time.perf_counter() - start

    receive_s = complete_s = 0.0
    while report.received < report.sent:
        start = time.perf_counter()
        got = entity.receive_dataframe(max_messages=batch).localCheckpoint()
        rows = got.groupBy("partition_id").count().collect()
        receive_s += time.perf_counter() - start
        n = sum(r["count"] for r in rows)
        if n == 0:
            break
        for r in rows:
            p = int(r["partition_id"])
            report.per_partition_received[p] = report.per_partition_received.get(p, 0) + r[1]
        start = time.perf_counter()
        report.completed += entity.complete_dataframe(got).settled
        complete_s += time.perf_counter() - start
        report.received += n
        report.batches += 1
    report.timings["receive_s"] = receive_s
    report.timings["complete_s"] = complete_s
    report.remaining = entity.counts()
    start = time.perf_counter()
    report.client_steps = client_tour(admin, f"{queue}-support")
    report.timings["client_tour_s"] = time.perf_counter() - start
    report.timings["total_s"] = time.perf_counter() - clock
    return report


def client_tour(admin: ServiceBusAdministrationClient, queue: str) -> list[str]:
    """The azure-servicebus-shaped client on a small queue: send, schedule and cancel,
    receive, complete, defer and fetch back, dead-letter and read the dead-letter queue."""
    ns = admin.namespace
    if ns.catalog.queue_exists(queue):
        admin.delete_queue(queue)
    admin.create_queue(queue, max_delivery_count=3)
    steps: list[str] = []
    client = ServiceBusClient(ns.root, spark=ns.spark)
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(text, application_properties={"n": i})
                              for i, text in enumerate(("refund", "question", "spam"))])
        steps.append("sent 3 messages in one batch")
        later = utcnow() + timedelta(days=1)
        [seq] = sender.schedule_messages(ServiceBusMessage("follow-up"), later)
        steps.append(f"scheduled 'follow-up' for {later:%Y-%m-%d %H:%M} UTC as #{seq}")
        sender.cancel_scheduled_messages(seq)
        steps.append(f"cancelled #{seq}")
    with client.get_queue_receiver(queue, max_wait_time=10) as receiver:
        got = {str(m): m for m in receiver.receive_messages(max_message_count=3)}
        for text, message in sorted(got.items()):
            if text == "refund":
                receiver.complete_message(message)
                steps.append(f"completed '{text}' (#{message.sequence_number})")
            elif text == "question":
                receiver.defer_message(message)
                [back] = receiver.receive_deferred_messages(message.sequence_number)
                receiver.complete_message(back)
                steps.append(f"deferred '{text}', fetched it back by number and completed it")
            else:
                receiver.dead_letter_message(message, reason="spam",
                                             error_description="flagged by the demo")
                steps.append(f"dead-lettered '{text}' with reason 'spam'")
    with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                   max_wait_time=10) as dlq:
        for message in dlq.receive_messages(max_message_count=10):
            steps.append(f"dead-letter queue: '{message}' ({message.dead_letter_reason})")
            dlq.complete_message(message)
    return steps
