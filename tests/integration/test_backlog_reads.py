"""Issue 41 (decision 034): a small receive reads what it takes, not the files around it.

A queue holds one large send, so each of its files holds ~10,000 rows. A receive of ten
messages finds them on the driver in the change feed, up to the rows it may take
(``engine.receive.head``), with no Spark job, and its bodies are read from the file that
holds them (``ReceiveResult.index_span``). The counts come from the reads themselves: the
rows delta-rs streamed for the head, and the rows Spark's inbox scan put out. Before, the
head read passed the driver's cap and a Spark job sorted the whole send, and the body read
scanned every row of it."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from sbqueue.engine import Namespace
from sbqueue.engine.receive.small import HEAD_ROWS
from sbqueue.spark.plans import scanned_rows
from sbqueue.store import appended

pytestmark = [pytest.mark.spark, pytest.mark.local_executor]

SENT = 40_000  # one send, one partition: a file of ~10,000 rows for each Spark task
ASKED = 10


def _streamed_by_head_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows each change-feed read on the driver streams (the reads run as they are)."""
    streamed: list[int] = []
    read = appended._changes

    def counted(*args: Any, **kwargs: Any) -> pa.RecordBatchReader:
        stream = read(*args, **kwargs)
        batches = list(stream)
        streamed.append(sum(b.num_rows for b in batches))
        return pa.RecordBatchReader.from_batches(stream.schema, batches)

    monkeypatch.setattr(appended, "_changes", counted)
    return streamed


def test_issue_41_a_small_receive_reads_the_rows_it_takes_not_the_send(
        spark: Any, admin: Any, namespace_root: str, spark_jobs: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    admin.create_queue("q")
    queue = Namespace(namespace_root, spark).entity("q")
    queue.send_dataframe(spark.range(SENT).selectExpr("repeat('x', 100) AS body"))
    files = queue.inbox.commit_ranges(queue.inbox.version())
    assert files is not None
    largest = max(rows for ranges in files.values() for _, _, rows in ranges)
    assert largest < SENT
    streamed = _streamed_by_head_reads(monkeypatch)
    seen: set[int] = set()
    for _ in range(3):  # the cursor moves into the send: each read starts past it
        streamed.clear()
        got, jobs = spark_jobs(lambda: queue.receive_dataframe(ASKED))
        assert jobs == 0  # decided on the driver: no Spark job over the send's files
        assert streamed and sum(streamed) <= 2 * (ASKED + HEAD_ROWS), streamed
        rows = got.collect()
        assert len(rows) == ASKED and all(bytes(r.body) == b"x" * 100 for r in rows)
        assert 0 < scanned_rows(got) <= largest  # one file, not the whole send
        numbers = {r.sequence_number for r in rows}
        assert not numbers & seen
        seen |= numbers
        assert queue.complete_dataframe(got).settled == ASKED
    assert sorted(seen) == list(range(min(seen), min(seen) + 3 * ASKED))  # in order
