"""Issue 22 point 3: ``spark.read.format("sbqueue")`` returns an entity's messages as its
SQL view does (a peek, S9; docs/decisions/024)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.core.sequence import partition_of
from sbqueue.datasource import register
from sbqueue.management import SqlRuleFilter

pytestmark = pytest.mark.spark


def read(spark, root: str, entity: str):
    register(spark)
    return (spark.read.format("sbqueue").option("namespace", root).option("entity", entity)
            .load())


def comparable(frame):
    """VARIANT columns cannot be sorted: compare their JSON."""
    return frame.withColumn("application_properties", F.to_json("application_properties"))


def same(source, view) -> None:
    assert_df_equality(comparable(source), comparable(view), ignore_row_order=True,
                       ignore_nullable=True)


@pytest.mark.slow
def test_a_read_is_the_view_in_every_state(admin, spark, namespace_root) -> None:
    admin.create_queue("orders", enable_partitioning=True)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("orders")
        sender.send_messages([ServiceBusMessage(f"m{i}", partition_key=f"k{i}",
                                                application_properties={"i": i})
                              for i in range(30)])
        sender.schedule_messages(ServiceBusMessage("later"), later)
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            got = receiver.receive_messages(10)
            for message in got[:3]:
                receiver.complete_message(message)  # S6.1: gone
            receiver.dead_letter_message(got[3], reason="bad")  # S7.1
            receiver.defer_message(got[4])  # S6.4
            receiver.abandon_message(got[5])  # S6.2: returned, delivered once
            with client.transaction() as tx:  # S12.2: its send is not a message yet
                tx.send_messages(sender, [ServiceBusMessage("in a transaction",
                                                          partition_key="k1")])
                entity = admin.namespace.entity("orders")
                source = read(spark, namespace_root, "orders")
                same(source, entity.messages())
                assert source.count() == 27 + 1  # the schedule, not the transaction's
    same(read(spark, namespace_root, "orders"), admin.namespace.entity("orders").messages())
    dead = read(spark, namespace_root, "orders/$DeadLetterQueue").collect()
    assert [(r.sub_queue, r.dead_letter_reason) for r in dead] == [("DeadLetter", "bad")]


@pytest.mark.slow
def test_a_subscription_reads_as_its_view(admin, spark, namespace_root) -> None:
    admin.create_topic("news", enable_partitioning=True)
    admin.create_subscription("news", "red", requires_session=True)
    admin.delete_rule("news", "red", "$Default")
    admin.create_rule("news", "red", "red", filter=SqlRuleFilter("color = 'red'"))
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_topic_sender("news").send_messages(
            [ServiceBusMessage(f"n{i}", session_id=None if i % 3 == 0 else f"s{i % 2}",
                               application_properties={"color": ["red", "blue"][i % 2]})
             for i in range(12)])
    path = "news/Subscriptions/red"
    source = read(spark, namespace_root, path)
    same(source, admin.namespace.entity(path).messages())
    # S10.1: a copy without a session id is in the dead-letter queue from the send on
    assert {r.sub_queue for r in source.where("session_id IS NULL").collect()} == {
        "DeadLetter"}


@pytest.mark.slow
def test_filters_give_the_views_rows_and_leave_the_dataframe_whole(admin, spark,
                                                                   namespace_root) -> None:
    """Filters on the partition and the sequence number give what the view gives; a query
    after a filtered one on the same DataFrame reads every partition (decision 024: why
    the source takes no filters in Spark 4.2)."""
    admin.create_queue("orders", enable_partitioning=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("orders").send_messages(
            [ServiceBusMessage(f"m{i}", partition_key=f"k{i}") for i in range(40)])
    view = comparable(admin.namespace.entity("orders").messages()).localCheckpoint()  # once
    source = read(spark, namespace_root, "orders")
    one = view.first()
    seq, part = one.sequence_number, partition_of(one.sequence_number)
    for kept in (F.col("partition_id") == part, F.col("sequence_number") >= seq):
        assert_df_equality(comparable(source.where(kept)), view.where(kept),
                           ignore_row_order=True, ignore_nullable=True)
    assert source.where("partition_id = 99").count() == 0
    assert source.count() == 40  # not the last filtered query's rows


def test_what_cannot_be_read_is_refused_naming_it(admin, spark, namespace_root) -> None:
    admin.create_queue("dupes", requires_duplicate_detection=True)
    register(spark)
    with pytest.raises(Exception, match="detects duplicates"):
        read(spark, namespace_root, "dupes").collect()
    with pytest.raises(Exception, match="'nowhere'"):
        read(spark, namespace_root, "nowhere").collect()
    with pytest.raises(Exception, match="relative path"):
        read(spark, "sbqueue-data", "dupes").collect()
