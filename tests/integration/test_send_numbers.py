"""S3.1, S3.4, S8.4: a send's sequence numbers read from its partitions' heads
(``engine.send.numbers``, decision 011) are the numbers the view gives and receives hand out,
before and after the cursor passes the rows."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import functions as F

from sbqueue.engine.send.numbers import send_numbers

pytestmark = pytest.mark.spark


def view_numbers(entity, send_id: str) -> list[int]:
    rows = (entity.messages(internal=True).where(F.col("_send_id") == send_id)
            .orderBy("_batch_index").select("sequence_number").collect())
    return [int(r[0]) for r in rows]


@pytest.mark.slow
def test_s3_4_a_schedules_numbers_from_the_heads_match_the_view(spark, admin,
                                                                 namespace_root) -> None:
    from sbqueue import ServiceBusClient, ServiceBusMessage

    admin.create_queue("q", enable_partitioning=True)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages([ServiceBusMessage(f"a{i}", partition_key="k") for i in range(5)])
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        assert len(receiver.receive_messages(2)) == 2  # the cursor moves into the backlog
        entity = sender._entity
        seqs = sender.schedule_messages(
            [ServiceBusMessage(f"s{i}", partition_key=k) for i, k in enumerate("kkxy")], later)
        [send_id] = [r[0] for r in entity.messages(internal=True)
                     .where(F.col("sequence_number") == seqs[0]).select("_send_id").collect()]
        assert send_numbers(entity.inbox, entity.ledger, send_id) \
            == view_numbers(entity, send_id) == seqs
        assert len(set(seqs)) == 4 and all(s >> 48 == seqs[0] >> 48 for s in seqs[:2])
        # The cursor passes them (stored in the scheduled lane): the same numbers.
        while receiver.receive_messages(10):
            pass
        assert send_numbers(entity.inbox, entity.ledger, send_id) == seqs
        sender.cancel_scheduled_messages(seqs[1])
        assert view_numbers(entity, send_id) == [seqs[0], *seqs[2:]]


def test_s8_4_a_cancel_is_one_ledger_commit_and_refuses_without_a_trace(
        spark, admin, namespace_root) -> None:
    """Cancelling scheduled messages, one still after the cursor and one the cursor has
    passed (in the ledger's scheduled lane), is one commit to the ledger (decision 011:
    the cursor passes the first without storing it); cancelling an active message raises
    MessageNotFound and commits nothing."""
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.exceptions import MessageNotFoundError

    admin.create_queue("c")
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("c")
        entity = sender._entity
        [passed] = sender.schedule_messages(ServiceBusMessage("passed"), later)
        receiver = client.get_queue_receiver("c", max_wait_time=2)
        assert receiver.receive_messages(5) == []  # the cursor stores it as scheduled
        assert entity.ledger.message_rows([passed]).count() == 1
        [waiting] = sender.schedule_messages(ServiceBusMessage("waiting"), later)
        sender.send_messages(ServiceBusMessage("active"))
        [active] = [int(r[0]) for r in entity.messages().where(F.col("state") == "Active")
                    .select("sequence_number").collect()]
        before = entity.ledger.version()
        with pytest.raises(MessageNotFoundError, match=rf"\[{active}\].*nothing was changed"):
            sender.cancel_scheduled_messages([waiting, active])
        assert entity.ledger.version() == before
        sender.cancel_scheduled_messages([passed, waiting])
        assert entity.ledger.version() == before + 1
        left = [(r[0], r[1]) for r in entity.messages().select("sequence_number", "state")
                .collect()]
        assert left == [(active, "Active")]
        assert entity.ledger.message_rows([passed, waiting]).count() == 0
