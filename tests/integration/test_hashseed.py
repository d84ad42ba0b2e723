"""Issue 5 point 3: the receive path decides the same under any PYTHONHASHSEED. Each seed
runs in its own process (own JVM): a message whose lock expires after its last delivery
is dead-lettered with its reason and without a lock, never handed out again (S6.7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import json, sys
    from sbqueue.core import clock
    from sbqueue.engine import Namespace
    from sbqueue.engine.partitions import GRACE_SECONDS
    from sbqueue.management import ServiceBusAdministrationClient
    root = sys.argv[1]
    admin = ServiceBusAdministrationClient(root)
    admin.create_queue("q", enable_partitioning=True, max_delivery_count=1,
                       lock_duration="PT5S", dead_lettering_on_message_expiration=True)
    queue = Namespace(root).entity("q")
    spark = queue.spark
    queue.send_dataframe(spark.range(32).selectExpr("CAST(id AS STRING) AS body"))
    first = queue.receive_dataframe(1000).count()
    # every lock expires, after the one delivery allowed: a stored lock also has the grace
    # for its commit (2x the slowest recent commit, at most GRACE_SECONDS[1]); moving the
    # clock less left a fast child's locks held (the test flaked once JVMs started faster)
    clock.advance(5 + GRACE_SECONDS[1] + 1)
    second = queue.receive_dataframe(1000).count()
    rows = queue.messages().selectExpr(
        "CAST(body AS STRING) AS body", "sequence_number", "sub_queue", "state",
        "delivery_count", "lock_token IS NULL AS unlocked", "dead_letter_reason"
    ).orderBy("sequence_number").collect()
    print("RESULT " + json.dumps({"first": first, "second": second,
                                  "rows": [r.asDict() for r in rows]}))
    """
)


def test_issue5_point3_receive_is_deterministic_under_hash_seeds(tmp_path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    procs = {seed: subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / f"ns-{seed}")],
        env={**os.environ, "PYTHONHASHSEED": seed}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for seed in ("0", "4242")}
    outcomes = {}
    for seed, proc in procs.items():
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
        line = next(x for x in out.splitlines() if x.startswith("RESULT "))
        outcomes[seed] = json.loads(line[len("RESULT "):])
    for outcome in outcomes.values():
        assert outcome["first"] == 32 and outcome["second"] == 0
        assert len(outcome["rows"]) == 32
        for row in outcome["rows"]:
            assert row["sub_queue"] == "DeadLetter" and row["unlocked"] is True, sorted(
                {tuple(r.values())[2:] for r in outcome["rows"]})
            assert row["dead_letter_reason"] == "MaxDeliveryCountExceeded"
            assert row["delivery_count"] == 1
    shapes = {seed: [(r["body"], r["sub_queue"], r["dead_letter_reason"]) for r in o["rows"]]
              for seed, o in outcomes.items()}
    assert shapes["0"] == shapes["4242"]
