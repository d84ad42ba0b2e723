"""DESIGN fact 4, S3.2, S1.7: separate OS processes on one local namespace.

Each child is its own Python process with its own JVM and local Spark, exactly as two
unrelated programs would be.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from sbqueue.engine import Namespace

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from sbqueue.engine import Namespace
    from sbqueue.management import ServiceBusAdministrationClient
    from sbqueue.exceptions import MessagingEntityAlreadyExistsError
    root, writer, sends = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    start_at = float(sys.argv[4])
    admin = ServiceBusAdministrationClient(root)
    queue = Namespace(root).entity("shared")
    spark = queue.spark
    spark.range(1).count()
    while time.time() < start_at:
        time.sleep(0.01)
    try:
        admin.create_queue("race")
        created = True
    except MessagingEntityAlreadyExistsError:
        created = False
    for n in range(sends):
        df = spark.range(10).selectExpr(f"concat('w{writer}-{n}-', id) AS body")
        queue.send_dataframe(df)
    print(json.dumps({"created": created, "sent": sends * 10}))
    """
)


def test_fact4_s3_2_concurrent_processes_lose_no_commit(spark, admin, namespace_root,
                                                        tmp_path) -> None:
    admin.create_queue("shared", enable_partitioning=True)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    writers, sends = 3, 4
    start_at = time.time() + 40  # all JVMs up before anyone commits
    procs = [subprocess.Popen([sys.executable, str(script), namespace_root, str(w), str(sends),
                               str(start_at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for w in range(writers)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    # S1.7 + catalog: exactly one of the concurrent creators won.
    assert sum(r["created"] for r in results) == 1
    queue = Namespace(namespace_root, spark).entity("shared")
    rows = queue.messages().select("body", "sequence_number", "partition_id").collect()
    # Issue 5 point 5: the numbers shown before any receive are the ones receives give.
    shown = {bytes(r.body).decode(): r.sequence_number for r in rows}
    got = queue.receive_dataframe(1000).select("body", "sequence_number").collect()
    assert {bytes(r.body).decode(): r.sequence_number for r in got} == shown
    bodies = {bytes(r.body).decode() for r in rows}
    expected = {f"w{w}-{n}-{i}" for w in range(writers) for n in range(sends) for i in range(10)}
    assert bodies == expected  # every commit survived, nothing duplicated
    assert len(rows) == len(expected)
    seqs = [r.sequence_number for r in rows]
    assert len(set(seqs)) == len(seqs)  # S3.2: unique under concurrent senders
    per_partition: dict[int, list[int]] = {}
    for r in rows:
        per_partition.setdefault(r.partition_id, []).append(r.sequence_number & ((1 << 48) - 1))
    for counters in per_partition.values():
        assert sorted(counters) == list(range(1, len(counters) + 1))
