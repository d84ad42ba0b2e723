"""Issue 43's first case: processes on different executors share one namespace. A bulk
receive on the local executor (driver reads and commits) locks 2,000 of 3,000 messages
as ranges (decision 018); their locks run out; a receiver on the Spark executor (as on
object storage or Spark Connect; here ``SBQUEUE_EXECUTOR=spark``)
must get all 3,000 back and complete them. And the other order: what the Spark executor
locked and let lapse, the local one gets back. Before, the Spark path skipped lapsed range
locks (``materialize_lapsed`` and the range settlement returned early there), so the
2,000 were never handed out again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import DataFrame

from sbqueue.core.tokens import is_range_token
from sbqueue.engine import Namespace
from sbqueue.engine.schema import WINDOW

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LOCK = timedelta(minutes=5)  # the longest (S5.2): a Spark receive of 1,000 took ~15 s here
SENT, FIRST = 3_000, 2_000


def _open(monkeypatch: pytest.MonkeyPatch, root: str, spark,  # type: ignore[no-untyped-def]
          executor: str):
    """The queue, opened in a namespace on ``executor``."""
    monkeypatch.setenv("SBQUEUE_EXECUTOR", executor)
    namespace = Namespace(root, spark)
    assert namespace.executor == executor
    return namespace.entity("q")


def _drain(queue, asked: int) -> list[DataFrame]:  # type: ignore[no-untyped-def]
    """Receive until a receive finds nothing; each batch read once (checkpointed)."""
    batches = []
    while True:
        batch = queue.receive_dataframe(asked).localCheckpoint()
        if batch.isEmpty():
            return batches
        batches.append(batch)


@pytest.mark.parametrize("first,then", [("local", "spark"), ("spark", "local")])
def test_issue_43_lapsed_locks_of_one_executor_come_back_on_the_other(
        first: str, then: str, admin, spark, namespace_root, clock,
        monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    admin.create_queue("q", enable_partitioning=True, lock_duration=LOCK)
    queue = _open(monkeypatch, namespace_root, spark, first)
    queue.send_dataframe(spark.range(SENT).selectExpr("CAST(id AS STRING) AS body"))
    held = queue.receive_dataframe(FIRST).localCheckpoint()
    tokens = {r[0] for r in held.select("lock_token").distinct().collect()}
    assert held.count() == FIRST
    ranged = queue.ledger.rows().where(f"row_type = '{WINDOW}'").count()
    assert (ranged > 0) == (first == "local")  # the local executor locked ranges
    assert all(is_range_token(t) for t in tokens) == (first == "local")

    clock.advance(LOCK + timedelta(seconds=30))
    queue = _open(monkeypatch, namespace_root, spark, then)
    batches = _drain(queue, 1_000)
    got = [r for b in batches for r in b.select("body", "delivery_count").collect()]
    assert sorted(int(r[0]) for r in got) == list(range(SENT))  # each once, none stranded
    assert sorted(int(r[1]) for r in got) == [1] * (SENT - FIRST) + [2] * FIRST
    settled = sum(queue.complete_dataframe(b).settled for b in batches)
    assert settled == SENT
    assert queue.counts()["total"] == 0
    late = queue.complete_dataframe(held)  # the first holder's locks ended (S6.6)
    assert late.settled == 0
