"""Client messages without Spark: validation, sizes, batches, enums, connection strings
(S2.1-S2.4, S2.6, S5.1, S7.1, S17)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from sbqueue import (
    ServiceBusMessage,
    ServiceBusMessageBatch,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from sbqueue.client.enums import as_receive_mode, as_sub_queue
from sbqueue.core.connection import parse_endpoint
from sbqueue.core.routing import key_expr, routing_key
from sbqueue.core.sizes import message_size
from sbqueue.exceptions import InvalidOperationError, MessageSizeExceededError


@pytest.mark.parametrize("value", [b"x", [1], {"a": 1}, object(), 2**63])
def test_s2_3_property_values_outside_the_allowed_types_are_refused(value: object) -> None:
    message = ServiceBusMessage("b", application_properties={"bad": value})
    with pytest.raises(InvalidOperationError, match=r"'bad'.*S2\.3"):
        message.validate()


def test_s2_3_allowed_property_values_pass() -> None:
    ServiceBusMessage("b", application_properties={
        "s": "x", "b": True, "i": 2**63 - 1, "f": 1.5, "t": datetime.now(timezone.utc),
        "d": timedelta(seconds=3), "u": uuid.uuid4(), "n": None}).validate()


def test_s2_1_body_is_str_or_bytes() -> None:
    assert ServiceBusMessage("hé").body_bytes == "hé".encode()
    assert str(ServiceBusMessage(b"abc")) == "abc"
    with pytest.raises(InvalidOperationError, match=r"S2.1"):
        ServiceBusMessage(42)  # type: ignore[arg-type]


def test_s2_4_size_counts_body_and_every_property() -> None:
    bare = ServiceBusMessage(b"x" * 100)
    assert bare.size_in_bytes == 100 + 32  # the uuid4 hex message_id it is sent with (S2.6)
    dressed = ServiceBusMessage(b"x" * 100, subject="abc", application_properties={"k": 1},
                                message_id="m")
    assert dressed.size_in_bytes == 100 + 3 + 1 + len('{"k":1}')
    assert message_size(b"", ["é"], None) == 2


def test_s2_4_a_full_batch_refuses_the_next_message() -> None:
    batch = ServiceBusMessageBatch(max_size_in_bytes=1000)
    batch.add_message(ServiceBusMessage(b"x" * 599, message_id="a"))
    with pytest.raises(MessageSizeExceededError, match="600 of 1000"):
        batch.add_message(ServiceBusMessage(b"x" * 499, message_id="b"))
    assert len(batch) == 1 and batch.size_in_bytes == 600
    assert isinstance(MessageSizeExceededError("x"), ValueError)  # as in the SDK (S17)


def test_received_message_body_is_an_iterator_of_bytes_and_str_is_the_text() -> None:
    received = ServiceBusReceivedMessage(b"hello", broker={"sequence_number": 7},
                                         subject="s")
    assert list(received.body) == [b"hello"]
    assert received.body_bytes == b"hello" and str(received) == "hello"
    assert received.sequence_number == 7 and received.label == "s"


def test_s5_1_enums_accept_plain_strings() -> None:
    assert as_receive_mode("peek_lock") is ServiceBusReceiveMode.PEEK_LOCK
    assert as_receive_mode("ReceiveAndDelete") is ServiceBusReceiveMode.RECEIVE_AND_DELETE
    assert as_sub_queue("deadletter") is ServiceBusSubQueue.DEAD_LETTER
    assert as_sub_queue(ServiceBusSubQueue.TRANSFER_DEAD_LETTER) is (
        ServiceBusSubQueue.TRANSFER_DEAD_LETTER)
    assert as_sub_queue(None) is None
    with pytest.raises(InvalidOperationError, match=r"S5.1"):
        as_receive_mode("sometimes")


def test_connection_string_endpoint_and_ignored_keys() -> None:
    conn = "Endpoint=file:///data/sb;SharedAccessKeyName=RootManageSharedAccessKey;" \
           "SharedAccessKey=abc="
    assert parse_endpoint(conn) == "file:///data/sb"
    with pytest.raises(InvalidOperationError, match="Azure Service Bus namespace"):
        parse_endpoint("Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKey=x")
    with pytest.raises(InvalidOperationError, match="no Endpoint"):
        parse_endpoint("SharedAccessKey=x")


def test_s4_1_key_precedence_is_one_expression() -> None:
    row = {"session_id": None, "partition_key": "p", "message_id": "m"}
    assert key_expr(True).evaluate(row) == "p"
    assert key_expr(True).evaluate({**row, "partition_key": None}) == "m"
    assert key_expr(False).evaluate({**row, "partition_key": None}) is None
    assert routing_key("s", "p", "m", True) == "s"
