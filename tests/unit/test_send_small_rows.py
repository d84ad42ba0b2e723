"""A send made on the driver (decision 015), its pure parts without Spark: the VARIANT
encoding of application properties (read back by PySpark's own reader), the JSON size of
S2.4, and the inbox rows (S2.2, S2.4, S4.1-S4.4, S8.1, S8.4, S10.1, S14.2). That the rows
are the Spark send's is held in tests/integration/test_send_small.py."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pyspark.sql.types import VariantVal

from sbqueue.core import clock
from sbqueue.core.properties import QueueProperties
from sbqueue.core.routing import RoundRobin, partition_for
from sbqueue.engine.send.small import inbox_rows
from sbqueue.exceptions import (
    InvalidOperationError,
    MessageSizeExceededError,
    PartitionUnavailableError,
)
from sbqueue.store.variant import encode_object, iso_duration, java_double, to_json

T = datetime(2026, 1, 2, 3, 4, 5, 678900, tzinfo=timezone.utc)


def test_s2_3_properties_read_back_as_sent() -> None:
    values: dict[str, Any] = {
        "s": "text", "small": 7, "i16": -300, "i32": 70_000, "big": 2**40, "f": 1.25,
        "yes": True, "no": False, "none": None, "t": T, "u": uuid.UUID(int=9),
        "long": "y" * 100, "é": "ü"}
    value, metadata = encode_object(values)
    back = VariantVal(value, metadata).toPython()
    expected = {**values, "u": str(values["u"])}
    assert back == expected


def test_many_keys_use_wider_ids_and_offsets() -> None:
    values = {f"key{i:04d}": "v" * 300 for i in range(300)}
    value, metadata = encode_object(values)
    assert VariantVal(value, metadata).toPython() == values


def test_doubles_and_durations_as_spark_writes_them() -> None:
    cases = {0.0: "0.0", 1.0: "1.0", 1.25: "1.25", 1e-5: "1.0E-5", 1e7: "1.0E7",
             123456789.125: "1.23456789125E8", -2.5e-7: "-2.5E-7", 0.001: "0.001"}
    assert {v: java_double(v) for v in cases} == cases
    assert iso_duration(timedelta(seconds=90)) == "PT90.0S"
    assert iso_duration(timedelta(seconds=90, microseconds=5)) == "PT90.000005S"


def test_s2_4_the_json_size_counts_utf8_and_sorted_fields() -> None:
    text = to_json({"z": 1, "é": "ü", "a": T, "f": 1e20, "n": None})
    assert text == '{"a":"2026-01-02 03:04:05.6789+00:00","f":1.0E20,"n":null,"z":1,"é":"ü"}'


def _queue(**kw: Any) -> QueueProperties:
    return QueueProperties(name="q", partition_count=kw.pop("partition_count", 16), **kw)


def _message(**kw: Any) -> dict[str, Any]:
    return {"body": b"body", "message_id": "m", **kw}


def test_s4_routing_keys_and_round_robin() -> None:
    props = _queue()
    rows = inbox_rows([_message(session_id="s"), _message(partition_key="k"), _message(),
                       _message()], props, frozenset(), RoundRobin(16, 5), "send")
    assert [r["partition_id"] for r in rows] == [partition_for("s", 16), partition_for("k", 16),
                                                 5, 6]
    assert [r["batch_index"] for r in rows] == [0, 1, 2, 3]
    fenced = inbox_rows([_message(), _message()], props, frozenset({5, 6}), RoundRobin(16, 5),
                        "send")
    assert [r["partition_id"] for r in fenced] == [7, 8]


def test_s4_4_s14_2_unavailable_partitions_refuse() -> None:
    props = _queue()
    with pytest.raises(PartitionUnavailableError, match="routes to unavailable partition"):
        inbox_rows([_message(partition_key="k")], props,
                   frozenset({partition_for("k", 16)}), RoundRobin(16), "send")
    with pytest.raises(PartitionUnavailableError, match="all 16 partitions"):
        inbox_rows([_message()], props, frozenset(range(16)), RoundRobin(16), "send")


@pytest.mark.parametrize(("message", "props", "error", "words"), [
    (_message(message_id="x" * 129), _queue(), InvalidOperationError, "longer than 128"),
    (_message(partition_key="a", session_id="b"), _queue(), InvalidOperationError, "differs"),
    (_message(), _queue(requires_session=True), InvalidOperationError, "requires sessions"),
    (_message(body=b"x" * 262_144), _queue(), MessageSizeExceededError, "at most 262144"),
    (_message(subject="s" * 70_000), _queue(max_message_size_in_kilobytes=1024),
     MessageSizeExceededError, "exceeds 64 KB"),
])
def test_s2_2_s2_4_s10_1_first_problem_refuses(message: dict[str, Any], props: QueueProperties,
                                               error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        inbox_rows([_message(), message], props, frozenset(), RoundRobin(16), "send")


def test_s8_1_s8_4_time_to_live_capped_and_counted_from_activation() -> None:
    clock.reset()
    props = _queue(default_message_time_to_live=timedelta(minutes=10))
    now = clock.utcnow()
    later = now + timedelta(hours=1)
    rows = inbox_rows([
        _message(),
        _message(time_to_live=timedelta(hours=5)),
        _message(time_to_live=timedelta(milliseconds=1500, microseconds=700),
                 scheduled_enqueue_time_utc=later),
        _message(time_to_live=timedelta(milliseconds=10)),
    ], props, frozenset(), RoundRobin(16), "send")
    lives = [r["expires_at_utc"] - max(r["enqueued_time_utc"],
                                       r["scheduled_enqueue_time_utc"] or now) for r in rows]
    assert lives == [timedelta(minutes=10), timedelta(minutes=10),
                     timedelta(milliseconds=1500), timedelta(seconds=1)]
    assert [r["time_to_live_ms"] for r in rows] == [None, 5 * 3600_000, 1500, 10]
    assert all(r["size_in_bytes"] == 5 for r in rows)  # body + message id


def test_fields_are_ordered_as_java_compares_keys() -> None:
    """Spark orders an object's fields by UTF-16 code units (Java's String.compareTo):
    beyond the BMP that is not code point order, and Spark's lookups rely on it."""
    assert to_json({"\uff41": 1, "\U0001f600": 2}) == '{"\U0001f600":2,"\uff41":1}'
    value, metadata = encode_object({"\uff41": 1, "\U0001f600": 2})
    assert VariantVal(value, metadata).toPython() == {"\uff41": 1, "\U0001f600": 2}


def _commit(log: Any, version: int, mark: int | None) -> None:
    import json

    lines = [{"commitInfo": {}}]
    if mark is not None:
        lines.append({"domainMetadata": {"domain": "delta.rowTracking", "removed": False,
                                         "configuration": json.dumps(
                                             {"rowIdHighWaterMark": mark})}})
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(x) for x in lines))


def test_the_row_id_mark_is_read_or_refused_never_guessed(tmp_path: Any) -> None:
    """A driver append draws row ids above the newest high-water mark in the log; when
    the log cannot tell it for sure it refuses (Spark appends instead) rather than start
    again from 0 and give two rows one id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sbqueue.store.objects import LocalFiles
    from sbqueue.store.tracked import Unsupported, _high_water_mark

    log = tmp_path / "_delta_log"
    log.mkdir()
    _commit(log, 0, None)
    assert _high_water_mark(LocalFiles(log), 0) == -1  # nothing ever assigned
    _commit(log, 1, 41)
    _commit(log, 2, None)  # a delete: no new ids
    assert _high_water_mark(LocalFiles(log), 2) == 41
    (log / f"{1:020d}.json").unlink()
    with pytest.raises(Unsupported, match="commit 1"):
        _high_water_mark(LocalFiles(log), 2)
    domain = pa.struct([("domain", pa.string()), ("configuration", pa.string()),
                        ("removed", pa.bool_())])
    pq.write_table(pa.table({"domainMetadata": pa.array([None], domain)}),
                   log / f"{1:020d}.checkpoint.parquet")
    with pytest.raises(Unsupported, match="no row-id high-water mark"):
        _high_water_mark(LocalFiles(log), 2)
    pq.write_table(pa.table({"domainMetadata": pa.array(
        [{"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark": 41}',
          "removed": False}], domain)}), log / f"{1:020d}.checkpoint.parquet")
    assert _high_water_mark(LocalFiles(log), 2) == 41
