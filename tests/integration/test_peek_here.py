"""A client's peek read on the driver (decision 026, docs/behaviour.md S9.1-S9.3): the rows
``peek_dataframe`` collects, in its order, without a Spark job."""

from __future__ import annotations

from datetime import timedelta

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.core.clock import utcnow
from sbqueue.engine.reads.view_here import VIEW_SCHEMA

pytestmark = [pytest.mark.spark, pytest.mark.local_executor]


def _same(spark, entity, **peek) -> list:  # type: ignore[no-untyped-def]
    """The driver's peek, checked against the view's."""
    here = entity.peek_rows(**peek)
    assert_df_equality(_comparable(spark.createDataFrame(here, VIEW_SCHEMA)),
                       _comparable(entity.peek_dataframe(**peek)), ignore_nullable=True)
    return here


def _comparable(frame):  # type: ignore[no-untyped-def]
    """The view's columns, the VARIANT as its JSON text (its Python value has no equality)."""
    return frame.select(*VIEW_SCHEMA.fieldNames()).withColumn(
        "application_properties", F.col("application_properties").cast("string"))


def test_s9_a_peek_on_the_driver_is_the_views_peek(spark, admin, namespace_root,
                                                   spark_jobs) -> None:
    admin.create_queue("q", enable_partitioning=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages([ServiceBusMessage(f"m{i}", partition_key=f"k{i % 3}",
                                                application_properties={"i": i})
                              for i in range(8)])
        sender.schedule_messages(ServiceBusMessage("later", partition_key="k0"),
                                 utcnow() + timedelta(hours=1))
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        first, second, third = receiver.receive_messages(3)
        receiver.defer_message(first)
        receiver.dead_letter_message(second, reason="bad")  # third stays locked
        entity = admin.namespace.entity("q")

        peeked, jobs = spark_jobs(lambda: entity.peek_rows(20))

        assert jobs == 0 and len(peeked) == 8  # 8 sent + 1 scheduled, less the dead one
        assert {r["state"] for r in peeked} == {"Active", "Deferred", "Scheduled"}
        _same(spark, entity, max_messages=20)
        _same(spark, entity, max_messages=3,
              after=(peeked[2]["enqueued_time_utc"], peeked[2]["sequence_number"]))
        _same(spark, entity, max_messages=20, from_sequence=third.sequence_number)
        dead = _same(spark, admin.namespace.entity("q/$DeadLetterQueue"), max_messages=5)
        assert [r["sequence_number"] for r in dead] == [second.sequence_number]
        shown = receiver.peek_messages(20)  # the client's own call takes the same path
        assert [m.sequence_number for m in shown] == [r["sequence_number"] for r in peeked]
        assert all(m.application_properties == {"i": int(str(m)[1:])}
                   for m in shown if str(m) != "later")  # typed as the Spark path types


def test_s8_5_a_subscriptions_peek_on_the_driver_is_the_views(spark, admin, namespace_root,
                                                               spark_jobs) -> None:
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_topic_sender("t")
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
        sender.schedule_messages(ServiceBusMessage("later"), utcnow() + timedelta(hours=1))
        entity = admin.namespace.entity("t/Subscriptions/s")

        _, jobs = spark_jobs(lambda: entity.peek_rows(10))
        peeked = _same(spark, entity, max_messages=10)

        assert jobs == 0
        assert sorted(bytes(r["body"]) for r in peeked) == [b"m0", b"m1", b"m2"]  # S8.5
