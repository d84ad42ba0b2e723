"""Issue 2 point 7: the demo job sends, receives and completes everything it sent."""

from __future__ import annotations

import pytest

from sbqueue.demo import run_demo

pytestmark = pytest.mark.spark


@pytest.mark.slow
def test_demo_moves_every_message_through_the_storage_layer(spark, namespace_root) -> None:
    report = run_demo(namespace_root, messages=400, batch=200)
    assert report.sent == report.received == report.completed == 400
    assert sum(report.per_partition_sent.values()) == 400
    assert len(report.per_partition_sent) == 16
    assert report.per_partition_received == {p: n for p, n in
                                             report.per_partition_sent.items() if n}
    assert report.remaining["total"] == 0
    assert {"send_s", "receive_s", "complete_s"} <= set(report.timings)
    steps = "\n".join(report.client_steps)  # the client tour (issue 6)
    for expected in ("sent 3", "cancelled", "completed 'refund'", "fetched it back",
                     "dead-letter queue: 'spam' (spam)"):
        assert expected in steps, steps
    again = run_demo(namespace_root, messages=50, batch=50)  # rerun on the same namespace
    assert again.completed == 50
