"""Which partitions a filtered ``spark.read.format("sbqueue")`` reads, and the rows it keeps
(``datasource.bounds``; S3.1: a sequence number's top bits are its partition)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    StringStartsWith,
)

from sbqueue.core.sequence import sequence_of
from sbqueue.datasource.bounds import Bounds


def bounds(*filters) -> tuple[Bounds, list]:
    b = Bounds()
    return b, b.keep(list(filters))


def test_partition_filters_choose_partitions() -> None:
    b, left = bounds(EqualTo(("partition_id",), 3))
    assert (b.partitions(16), left) == ([3], [])
    assert bounds(In(("partition_id",), (1, 5, 40)))[0].partitions(16) == [1, 5]
    assert bounds(In(("partition_id",), (None, 2)))[0].partitions(16) == [2]  # NULL: none
    assert bounds(GreaterThan(("partition_id",), 13))[0].partitions(16) == [14, 15]
    assert bounds(EqualTo(("partition_id",), 3), LessThan(("partition_id",), 3))[0] \
        .partitions(16) == []


def test_sequence_numbers_choose_their_partitions() -> None:
    seq = sequence_of(5, 17)
    assert bounds(EqualTo(("sequence_number",), seq))[0].partitions(16) == [5]
    assert bounds(GreaterThanOrEqual(("sequence_number",), seq))[0].partitions(16) == list(
        range(5, 16))
    assert bounds(LessThan(("sequence_number",), sequence_of(2, 0)))[0].partitions(16) == [
        0, 1]
    assert bounds(In(("sequence_number",), (sequence_of(1, 1), sequence_of(9, 4))))[0] \
        .partitions(16) == [1, 9]


def test_rows_are_kept_exactly_and_other_filters_left_to_spark() -> None:
    cut = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)
    other = StringStartsWith(("message_id",), "a")
    b, left = bounds(GreaterThan(("sequence_number",), sequence_of(0, 5)),
                     # PySpark hands a filter's timestamp over naive, in local time
                     LessThan(("enqueued_time_utc",), cut.astimezone().replace(tzinfo=None)),
                     other)
    assert left == [other]
    keep = b.row_test()
    row = {"sequence_number": sequence_of(0, 6), "enqueued_time_utc": cut - timedelta(1)}
    assert keep(row)
    assert not keep({**row, "sequence_number": sequence_of(0, 5)})
    assert not keep({**row, "enqueued_time_utc": cut})
    assert not keep({**row, "enqueued_time_utc": None})
