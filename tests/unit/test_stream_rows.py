"""The streaming sink's pure parts (docs/decisions/024): a row of a send DataFrame as a
message (S2.1, S2.3, S2.6), its options, and the query id its checkpoint holds."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import Row

from sbqueue.datasource.options import Options, query_id
from sbqueue.datasource.sink import outgoing
from sbqueue.exceptions import InvalidOperationError


def test_a_row_becomes_the_message_a_driver_send_takes() -> None:
    local = datetime(2026, 11, 27, 12, 0)  # PySpark's rows carry naive local times
    message = outgoing(Row(body="hi", message_id=None, time_to_live=90,
                           scheduled_enqueue_time_utc=local,
                           application_properties=Row(n=1, color="red")))
    assert message["body"] == b"hi"
    assert len(message["message_id"]) == 32  # S2.6: one is made
    assert message["time_to_live"] == timedelta(seconds=90)
    assert message["scheduled_enqueue_time_utc"] == local.astimezone(timezone.utc)
    assert message["application_properties"] == {"n": 1, "color": "red"}
    assert message["session_id"] is None


def test_bytes_bodies_maps_and_intervals_pass_as_they_are() -> None:
    message = outgoing(Row(body=bytearray(b"\x00\x01"), message_id="m1",
                           time_to_live=timedelta(minutes=1),
                           application_properties={"k": "v"}))
    assert (message["body"], message["message_id"]) == (b"\x00\x01", "m1")
    assert message["time_to_live"] == timedelta(minutes=1)
    assert message["application_properties"] == {"k": "v"}


def test_bad_rows_are_refused_naming_the_rule() -> None:
    with pytest.raises(InvalidOperationError, match=r"body is null.*S2\.1"):
        outgoing(Row(body=None))
    with pytest.raises(InvalidOperationError, match=r"not an object.*S2\.3"):
        outgoing(Row(body="x", application_properties=[1, 2]))


def test_options_are_required_and_the_namespace_absolute() -> None:
    with pytest.raises(InvalidOperationError, match=r"option\('namespace'"):
        Options.parse({"entity": "orders"})
    with pytest.raises(InvalidOperationError, match=r"option\('entity'"):
        Options.parse({"namespace": "/data/ns"})
    with pytest.raises(InvalidOperationError, match=r"'sbqueue-data' is a relative path"):
        Options.parse({"namespace": "sbqueue-data", "entity": "orders"})
    assert Options.parse({"namespace": "/data/ns", "entity": "orders"}).entity == "orders"


def test_the_query_id_comes_from_the_checkpoint(tmp_path) -> None:
    (tmp_path / "metadata").write_text(json.dumps({"id": "q-1"}) + "\n")
    assert query_id({"checkpointlocation": str(tmp_path)}) == "stream-q-1"
    with pytest.raises(InvalidOperationError, match="checkpointLocation None"):
        query_id({})
    with pytest.raises(InvalidOperationError, match="no query id"):
        query_id({"checkpointLocation": str(tmp_path / "missing")})


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A worker whose local zone is not UTC (PySpark's naive times depend on it)."""
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_wall_clock_schedule_is_utc_and_a_timestamp_keeps_its_instant(new_york) -> None:
    """S8.1: a TIMESTAMP_NTZ schedule is read as UTC (as a DataFrame send in sbqueue's UTC
    session reads it), whatever the worker's zone; a TIMESTAMP, which PySpark hands as the
    worker's local time, keeps its instant."""
    noon = datetime(2026, 12, 1, 12, 0)
    wall = outgoing(Row(body="x", scheduled_enqueue_time_utc=noon), wall_clock_schedule=True)
    assert wall["scheduled_enqueue_time_utc"] == datetime(2026, 12, 1, 12, 0,
                                                          tzinfo=timezone.utc)
    local = outgoing(Row(body="x", scheduled_enqueue_time_utc=noon))
    assert local["scheduled_enqueue_time_utc"] == datetime(2026, 12, 1, 17, 0,
                                                           tzinfo=timezone.utc)


def test_the_sink_reads_a_wall_clock_schedule_from_the_query_schema() -> None:
    from pyspark.sql.types import (
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    from sbqueue.datasource.sink import StreamSink

    def sink(kind):  # type: ignore[no-untyped-def]
        schema = StructType([StructField("body", StringType()),
                             StructField("scheduled_enqueue_time_utc", kind)])
        return StreamSink({"namespace": "/ns", "entity": "q"}, schema)

    assert sink(TimestampNTZType()).wall_clock and not sink(TimestampType()).wall_clock
