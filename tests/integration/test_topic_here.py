"""A topic's client send, schedule and cancel decided on the driver (issue 41, item 6).

On a local folder they run no Spark job, and they agree with Spark: a topic's sequence
numbers are its plain rows' Delta row ids (S3.4, S8.5), read here from the log and the
data files (``store.row_ids``) and compared with Spark's ``_metadata.row_id``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import functions as F

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.core.sequence import sequence_of
from sbqueue.engine.schema import COPY_BITS
from sbqueue.exceptions import MessageNotFoundError
from sbqueue.management import RuleProperties, SqlRuleAction, SqlRuleFilter

pytestmark = [pytest.mark.spark, pytest.mark.local_executor]


def _topic(admin) -> None:
    admin.create_topic("t", enable_partitioning=True)
    admin.create_subscription("t", "all")
    admin.create_subscription("t", "ones", default_rule=RuleProperties(
        "one", SqlRuleFilter("n = 1"), SqlRuleAction("SET n = 10")))


def _spark_numbers(topic, send_id: str) -> list[int]:
    """The reference: Spark's row ids of the send's plain rows, in batch order."""
    rows = (topic.inbox.rows((F.col("send_id") == send_id)
                             & (F.col("batch_index") % (1 << COPY_BITS) == 0))
            .select("partition_id", "batch_index", F.col("_metadata.row_id"))
            .orderBy("batch_index").collect())
    return [sequence_of(int(r[0]), int(r[2]) + 1) for r in rows]


def _copies(admin) -> dict[str, int]:
    return {sub: admin.get_subscription_runtime_properties("t", sub).total_message_count
            for sub in ("all", "ones")}


def test_s8_4_s8_5_topic_send_schedule_cancel_run_no_spark_job(
        spark, spark_jobs, admin, namespace_root) -> None:
    _topic(admin)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with ServiceBusClient(namespace_root, spark=spark) as client, \
            client.get_topic_sender("t") as sender:
        _, jobs = spark_jobs(lambda: sender.send_messages(
            [ServiceBusMessage(f"m{i}", application_properties={"n": i}) for i in range(4)]))
        assert jobs == 0
        seqs, jobs = spark_jobs(lambda: sender.schedule_messages(
            [ServiceBusMessage(f"s{i}", application_properties={"n": i}) for i in range(3)],
            later))
        assert jobs == 0
        topic = sender.entity
        send_id = topic.inbox.rows(F.col("body") == F.lit(b"s0")).first()["send_id"]
        assert seqs == _spark_numbers(topic, send_id)  # the same numbers Spark reads
        assert admin.get_topic_runtime_properties("t").scheduled_message_count == 3
        _, jobs = spark_jobs(lambda: sender.cancel_scheduled_messages(seqs[:2]))
        assert jobs == 0
        assert admin.get_topic_runtime_properties("t").scheduled_message_count == 1
        with pytest.raises(MessageNotFoundError):
            sender.cancel_scheduled_messages(seqs[1])  # gone from every subscription
        sender.cancel_scheduled_messages(seqs[2])
        assert admin.get_topic_runtime_properties("t").scheduled_message_count == 0
    assert _copies(admin) == {"all": 4, "ones": 1}  # the sends, none of the scheduled


@pytest.mark.slow
def test_s3_4_row_ids_read_here_match_spark_across_writers_and_rewrites(
        spark, admin, namespace_root) -> None:
    """Numbers of a Spark DataFrame send read on the driver, and a cancel after OPTIMIZE
    materialized the row ids (the driver read steps aside; the cancel still holds)."""
    _topic(admin)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with ServiceBusClient(namespace_root, spark=spark) as client, \
            client.get_topic_sender("t") as sender:
        topic = sender.entity
        frame = spark.createDataFrame([(f"d{i}", later) for i in range(40)],
                                      "body string, scheduled_enqueue_time_utc timestamp")
        spark_send = topic.send_dataframe(frame)  # Spark's append: Spark's baseRowIds
        here = sender.schedule_messages([ServiceBusMessage("c")], later)
        assert topic.sequence_numbers(spark_send.send_id) == _spark_numbers(
            topic, spark_send.send_id)
        mixed = topic.sequence_numbers(spark_send.send_id)[:3] + here
        sender.cancel_scheduled_messages(mixed[:2])
        topic.send_dataframe(frame)  # a second file in each partition: OPTIMIZE rewrites
        spark.sql(f"OPTIMIZE delta.`{topic.inbox.path}`")
        rewritten = topic.inbox.rows_by_id_here(
            mixed[2] >> 48, [(mixed[2] & ((1 << 48) - 1)) - 1], ["send_id"])
        assert rewritten is None  # ids now in a materialized column: Spark decides
        sender.cancel_scheduled_messages(mixed[2:])
        assert admin.get_topic_runtime_properties("t").scheduled_message_count == 77  # 81 less 4
