"""Issue 22 point 2: ``spark.readStream.format("sbqueue")`` delivers a queue's messages in
peek-locked micro-batches and completes each batch's messages once its sink has committed
(at least once, never lost; S5, S6.1, S6.7; docs/decisions/024)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from chispa import assert_df_equality

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.datasource import register

pytestmark = pytest.mark.spark


def stream(spark, root: str, entity: str, **options: str):
    register(spark)
    reader = (spark.readStream.format("sbqueue").option("namespace", root)
              .option("entity", entity))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def drain_into_table(frame, table: str, checkpoint: str):
    query = (frame.select("message_id", "sub_queue", "delivery_count").writeStream
             .format("delta").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start(table))
    query.awaitTermination()
    return query


def send(spark, root: str, queue: str, ids: list[str]) -> None:
    with ServiceBusClient(root, spark=spark) as client:
        client.get_queue_sender(queue).send_messages(
            [ServiceBusMessage(i, message_id=i, partition_key=i) for i in ids])


@pytest.mark.slow
def test_a_queue_drains_into_a_table_batch_by_batch(admin, spark, namespace_root,
                                                    tmp_path) -> None:
    admin.create_queue("orders", enable_partitioning=True)
    ids = [f"m{i:02d}" for i in range(50)]
    send(spark, namespace_root, "orders", ids)
    table = str(tmp_path / "table")
    query = drain_into_table(stream(spark, namespace_root, "orders", maxMessagesPerBatch="20"),
                             table, str(tmp_path / "checkpoint"))
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [20, 20, 10]
    expected = spark.createDataFrame([(i, "Main", 1) for i in ids],
                                     "message_id string, sub_queue string, delivery_count int")
    assert_df_equality(spark.read.format("delta").load(table), expected,
                       ignore_row_order=True, ignore_nullable=True)
    assert admin.namespace.entity("orders").counts()["total"] == 0  # every batch completed


@pytest.mark.slow
def test_a_dead_letter_queue_streams_too(admin, spark, namespace_root, tmp_path) -> None:
    admin.create_queue("orders")
    send(spark, namespace_root, "orders", ["a", "b", "c"])
    with ServiceBusClient(namespace_root, spark=spark) as client, \
            client.get_queue_receiver("orders", max_wait_time=5) as receiver:
        for message in receiver.receive_messages(3):
            receiver.dead_letter_message(message, reason="bad")
    table = str(tmp_path / "table")
    drain_into_table(stream(spark, namespace_root, "orders/$DeadLetterQueue"), table,
                     str(tmp_path / "checkpoint"))
    rows = spark.read.format("delta").load(table).collect()
    assert sorted((r.message_id, r.sub_queue) for r in rows) == [
        ("a", "DeadLetter"), ("b", "DeadLetter"), ("c", "DeadLetter")]
    assert admin.namespace.entity("orders").counts()["dead_letter"] == 0


@pytest.mark.slow
def test_sessions_stream_in_order_one_holder_at_a_time(admin, spark, namespace_root,
                                                       tmp_path) -> None:
    """S10.4: on a session queue each batch locks some sessions and takes their messages in
    sequence order; a session's later messages come in later batches, never before."""
    admin.create_queue("chats", requires_session=True, enable_partitioning=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("chats").send_messages(
            [ServiceBusMessage(f"{s}-{i}", session_id=s) for s in "abcd" for i in range(5)])
    table = str(tmp_path / "table")

    def write(batch, batch_id) -> None:
        batch.selectExpr("session_id", "sequence_number", f"{batch_id} AS batch").write \
            .format("delta").mode("append").save(table)

    (stream(spark, namespace_root, "chats", maxMessagesPerBatch="6",
            maxSessionsPerBatch="2").writeStream.foreachBatch(write)
     .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True)
     .start().awaitTermination())
    rows = spark.read.format("delta").load(table).collect()
    assert len(rows) == 20 and len({r.sequence_number for r in rows}) == 20
    for session in "abcd":
        mine = sorted((r.batch, r.sequence_number) for r in rows if r.session_id == session)
        assert [seq for _, seq in mine] == sorted(seq for _, seq in mine)  # S10.4
        assert all(len({r.session_id for r in rows if r.batch == b}) <= 2
                   for b in {r.batch for r in rows})
    assert admin.namespace.entity("chats").counts()["total"] == 0


@pytest.mark.slow
def test_a_poison_message_fails_its_batch_until_it_is_dead_lettered(admin, spark,
                                                                    namespace_root,
                                                                    tmp_path) -> None:
    """S6.7: a batch that fails completes nothing; its messages come back when their locks
    end, with their delivery count raised, and a message past its queue's maximum is
    dead-lettered instead of failing the stream forever."""
    admin.create_queue("orders", lock_duration=timedelta(seconds=5), max_delivery_count=2)
    send(spark, namespace_root, "orders", ["ok-1", "poison", "ok-2"])
    table, checkpoint = str(tmp_path / "table"), str(tmp_path / "checkpoint")

    def write(batch, _batch_id) -> None:
        if batch.where("message_id = 'poison'").count():
            raise ValueError("cannot handle this one")
        batch.select("message_id", "delivery_count").write.format("delta").mode(
            "append").save(table)

    failures = 0
    for _ in range(6):
        query = (stream(spark, namespace_root, "orders", maxMessagesPerBatch="1")
                 .writeStream.foreachBatch(write).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination()
        except Exception:
            failures += 1
            time.sleep(11)  # the failed batch's lock ends (5 s and its commit grace)
            continue
        if admin.namespace.entity("orders").counts()["active"] == 0:
            break
    assert failures == 2  # delivered twice: the queue's max_delivery_count
    landed = sorted(r.message_id for r in spark.read.format("delta").load(table).collect())
    assert landed == ["ok-1", "ok-2"]
    counts = admin.namespace.entity("orders").counts()
    assert (counts["active"], counts["dead_letter"]) == (0, 1)
    [dead] = admin.namespace.entity("orders/$DeadLetterQueue").messages().collect()
    assert (dead.message_id, dead.dead_letter_reason) == ("poison", "MaxDeliveryCountExceeded")


def test_bad_options_are_refused_naming_them(admin, spark, namespace_root, tmp_path) -> None:
    admin.create_queue("orders")
    with pytest.raises(Exception, match=r"maxMessagesPerBatch 'many'"):
        drain_into_table(stream(spark, namespace_root, "orders", maxMessagesPerBatch="many"),
                         str(tmp_path / "t"), str(tmp_path / "c"))
    send(spark, namespace_root, "orders", ["a"])
    once = (stream(spark, namespace_root, "orders").writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / "c2")).trigger(once=True)
            .start(str(tmp_path / "t2")))
    with pytest.raises(Exception, match=r"Trigger.Once.*availableNow"):
        once.awaitTermination()
    assert admin.namespace.entity("orders").counts()["active"] == 1  # nothing taken
