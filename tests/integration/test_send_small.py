"""Decision 015: a client send to a local queue is decided and committed on the driver
(``engine.send.small`` + ``store.tracked``), no Spark job. Its inbox rows are the Spark
send's row for row (S2.1-S2.4, S4.1-S4.3, S8.1, S8.4), its errors the same (S2.2, S2.4,
S10.1), and Spark reads what it wrote: row ids, commit versions, the change feed."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.exceptions import InvalidOperationError, MessageSizeExceededError
from sbqueue.location import local_path
from sbqueue.store import checkpoints

pytestmark = [pytest.mark.spark, pytest.mark.local_executor]

NOW = datetime.now(timezone.utc).replace(microsecond=0)


def _messages() -> list[ServiceBusMessage]:
    """Every field a client sets, every property type of S2.3, keyed and scheduled ones."""
    props: dict[str, Any] = {"s": "text", "i": 7, "big": 2**40, "neg": -300, "f": 1.25,
                             "b": True, "t": NOW, "d": timedelta(seconds=90, microseconds=5),
                             "u": uuid.UUID(int=9), "n": None, "tiny": 1e-5}
    return [
        ServiceBusMessage("plain", partition_key="k0"),
        ServiceBusMessage(b"\x00bytes", partition_key="k1", application_properties=props,
                          subject="subj", content_type="ct", correlation_id="c", to="to",
                          reply_to="rt", message_id="m-1", time_to_live=timedelta(seconds=30)),
        ServiceBusMessage("later", session_id="s1", reply_to_session_id="r",
                          scheduled_enqueue_time_utc=NOW + timedelta(hours=1),
                          time_to_live=timedelta(milliseconds=1500)),
        ServiceBusMessage("x" * 5000, partition_key="k3", application_properties={"é": "ü"}),
    ]


def _stored(client: ServiceBusClient, queue: str) -> DataFrame:
    """The inbox rows, without what differs between two sends by design (ids of the send,
    when it ran); the time to live as the span from activation to expiry."""
    inbox = client.get_queue_sender(queue).entity.inbox
    active = F.greatest("enqueued_time_utc", F.coalesce("scheduled_enqueue_time_utc",
                                                         "enqueued_time_utc"))
    return (inbox.rows()
            .withColumn("lives_ms", (F.unix_micros("expires_at_utc") - F.unix_micros(active))
                        / 1000)
            .withColumn("properties", F.to_json("application_properties"))
            .withColumn("message_id", F.when(F.col("message_id") == "m-1", "m-1"))
            .drop("send_id", "batch_index", "enqueued_time_utc", "expires_at_utc", "segment",
                  "application_properties")
            .orderBy("body"))


def test_s2_s4_s8_a_driver_send_stores_the_spark_sends_rows(
        spark: Any, admin: Any, namespace_root: str, monkeypatch: pytest.MonkeyPatch,
        spark_jobs: Any) -> None:
    for name in ("here", "spark"):
        admin.create_queue(name, enable_partitioning=True,
                           default_message_time_to_live=timedelta(minutes=10))
    with ServiceBusClient(namespace_root, spark=spark) as client:
        _, jobs = spark_jobs(lambda: client.get_queue_sender("here").send_messages(
            _messages()))
        assert jobs == 0
        monkeypatch.setenv("SBQUEUE_DRIVER_COMMITS", "0")
        client.get_queue_sender("spark").send_messages(_messages())
        assert_df_equality(_stored(client, "here"), _stored(client, "spark"),
                           ignore_nullable=True)
        inbox = client.get_queue_sender("here").entity.inbox
        typed = inbox.rows(F.col("message_id") == "m-1").select(
            "application_properties").first()[0].toPython()
        assert typed["t"] == NOW and typed["i"] == 7 and typed["d"] == "PT90.000005S"


def test_s2_2_s2_4_s10_1_refused_sends_say_what_the_spark_send_says(
        spark: Any, admin: Any, namespace_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    admin.create_queue("q", enable_partitioning=True)
    admin.create_queue("sq", requires_session=True)
    bad = [("q", ServiceBusMessage("x", message_id="i" * 129), InvalidOperationError),
           ("q", ServiceBusMessage("x", partition_key="a", session_id="b"),
            InvalidOperationError),
           ("sq", ServiceBusMessage("x"), InvalidOperationError),
           ("q", ServiceBusMessage("x" * (256 * 1024)), MessageSizeExceededError)]
    with ServiceBusClient(namespace_root, spark=spark) as client:
        texts: dict[str, list[str]] = {}
        for switch in ("1", "0"):
            monkeypatch.setenv("SBQUEUE_DRIVER_COMMITS", switch)
            for queue, message, error in bad:
                with pytest.raises(error) as caught:
                    client.get_queue_sender(queue).send_messages(message)
                texts.setdefault(switch, []).append(str(caught.value))
        assert texts["1"] == texts["0"]
        assert client.get_queue_sender("q").entity.inbox.rows().count() == 0


def test_s3_s5_driver_and_spark_sends_side_by_side_keep_row_ids_and_order(
        spark: Any, admin: Any, namespace_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four threads sending on the driver while Spark appends: every row id is distinct
    (the row-tracking high-water mark is honoured both ways), every message is received
    once, and a sender's messages keep their order (S3.2)."""
    admin.create_queue("q", lock_duration="PT5M")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")

        def send(worker: int) -> None:
            for i in range(6):
                sender.send_messages(ServiceBusMessage(f"w{worker}-{i:02d}"))
        threads = [threading.Thread(target=send, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        sender.entity.send_dataframe(spark.createDataFrame([(f"df-{i:02d}",) for i in range(5)],
                                                           "body string"))
        for t in threads:
            t.join()
        ids = [r[0] for r in sender.entity.inbox.rows().select("_metadata.row_id").collect()]
        assert len(ids) == 29 and len(set(ids)) == 29
        receiver = client.get_queue_receiver("q", max_wait_time=2)
        got = []
        while batch := receiver.receive_messages(30, max_wait_time=1):
            got += batch
            for m in batch:
                receiver.complete_message(m)
        bodies = [str(m) for m in got]
        assert sorted(bodies) == sorted({*(f"w{w}-{i:02d}" for w in range(4) for i in range(6)),
                                         *(f"df-{i:02d}" for i in range(5))})
        for w in range(4):
            mine = [b for b in bodies if b.startswith(f"w{w}-")]
            assert mine == sorted(mine)
        seqs = [m.sequence_number for m in got]
        assert seqs == sorted(seqs)


def test_s8_4_schedule_and_cancel_after_a_driver_send(
        spark: Any, admin: Any, namespace_root: str, spark_jobs: Any) -> None:
    admin.create_queue("q", enable_partitioning=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        at = datetime.now(timezone.utc) + timedelta(minutes=5)
        seqs, jobs = spark_jobs(lambda: sender.schedule_messages(
            [ServiceBusMessage("a"), ServiceBusMessage("b", partition_key="k")], at))
        assert len(seqs) == 2 and jobs == 0
        peeked = client.get_queue_receiver("q").peek_messages(5)
        assert sorted(m.sequence_number for m in peeked) == sorted(seqs)
        sender.cancel_scheduled_messages(seqs)
        assert client.get_queue_receiver("q").peek_messages(5) == []


def test_driver_commits_checkpoint_the_log_and_row_ids_run_on(
        spark: Any, admin: Any, namespace_root: str) -> None:
    """Driver sends write a checkpoint every ten versions (as Spark would), and the row-id
    high-water mark survives it both ways: Spark's append after it and ours after that
    take fresh ids."""
    admin.create_queue("q")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        for i in range(21):
            sender.send_messages(ServiceBusMessage(f"m{i}"))
        inbox = sender.entity.inbox
        log = local_path(inbox.path) / "_delta_log"
        checkpoints.written()  # a worker thread writes it beside the sends
        assert (log / f"{20:020d}.checkpoint.parquet").exists()
        sender.entity.send_dataframe(spark.createDataFrame([("df",)], "body string"))
        sender.send_messages(ServiceBusMessage("after"))
        ids = [r[0] for r in inbox.rows().select("_metadata.row_id").collect()]
        assert sorted(ids) == list(range(23))
