"""Issue 19 point 1: sbqueue over a real Spark Connect server.

The server is the one in the pip ``pyspark`` (its jars hold the Connect server), started
with spark-submit and sbqueue's own properties file (``sbqueue spark-conf``: Delta's jars,
extension and catalog). Delta's Connect plugin is not needed: sbqueue talks to Delta in SQL
only. The client side runs as a user's program does: a fresh interpreter with
``SPARK_REMOTE`` set, no JVM of its own, and every read and commit made by the server:
sbqueue tells a Connect session from the session itself and picks the Spark executor
(``store.executor``), with no environment variable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from ports import free_port, listening

# spark-submit resolves the Delta jars with Ivy in the shared cache: one worker at a time
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-submit")]

CHILD = textwrap.dedent(
    """
    import json, subprocess, sys
    from datetime import timedelta
    from pyspark.sql import functions as F
    from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
    from sbqueue.management import (RuleProperties, ServiceBusAdministrationClient,
                                    SqlRuleFilter)
    from sbqueue.spark import get_session

    root = sys.argv[1]
    spark = get_session()  # SPARK_REMOTE: the Connect session, taken as is
    out = {"session": type(spark).__module__,
           "executor": Namespace(root, spark).executor}  # no environment variable says so
    admin = ServiceBusAdministrationClient(root, spark=spark)
    # A Spark-path complete is a MERGE on the server: 10-25 s each on a loaded two-core CI
    # machine, so a 60 s lock can lapse over three of them (issue 43 has the target)
    admin.create_queue("q", enable_partitioning=True, lock_duration=timedelta(minutes=5))
    admin.create_queue("sink")
    admin.create_topic("t")
    admin.create_subscription("t", "red", forward_to="sink", default_rule=RuleProperties(
        "red", SqlRuleFilter("color = 'red'")))
    with ServiceBusClient(root, spark=spark) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(f"m{i}") for i in range(3)])
        sent = Namespace(root, spark).entity("q").version()
        with client.get_queue_receiver("q", max_wait_time=10) as receiver:
            got = []  # each batch completed as it comes, as a user's loop does
            while len(got) < 3 and (more := receiver.receive_messages(3 - len(got))):
                for message in more:
                    receiver.complete_message(message)
                got += more
        out["client"] = sorted(str(m) for m in got)
        client.get_topic_sender("t").send_messages(
            [ServiceBusMessage(c, application_properties={"color": c})
             for c in ("red", "blue", "red")])
    ns = Namespace(root, spark)
    q = ns.entity("q")
    q.send_dataframe(spark.range(4).select(F.concat(F.lit("d"), F.col("id").cast("string"))
                                           .alias("body")))
    batch = q.receive_dataframe(max_messages=10).localCheckpoint()
    out["dataframe"] = sorted(r.body.decode() for r in batch.select("body").collect())
    settled = q.complete_dataframe(batch)
    out["settled"] = settled.settled
    ns.register_views()
    out["view"] = spark.sql(f"SELECT count(*) FROM {ns.sql_name('q')}").first()[0]
    out["subscription"] = admin.get_subscription_runtime_properties(
        "t", "red").total_message_count
    forward = sys.argv[2]  # the installed script, by its path, as cron would start it
    job = subprocess.run([forward, "--namespace", root], capture_output=True, text=True,
                         timeout=600)
    out["forward_rc"], out["forward_err"] = job.returncode, job.stderr[-2000:]
    with ServiceBusClient(root, spark=spark) as client, client.get_queue_receiver(
            "sink", max_wait_time=10) as receiver:
        moved = receiver.receive_messages(10)
        out["forwarded"] = sorted(str(m) for m in moved)
    admin.create_queue("audit")  # time travel: q as sent, before any receive (issue 22)
    out["as_of"] = sorted(r.body.decode() for r in q.as_of(sent).select("body").collect())
    out["replayed"] = q.replay(sent, "audit").count
    from sbqueue.datasource import register  # format("sbqueue"): the server's workers
    register(spark)
    incoming = root + "-incoming"
    import os
    os.makedirs(incoming)
    with open(os.path.join(incoming, "part-0.json"), "w") as f:
        f.write('{"body": "s0"}\\n{"body": "s1"}\\n')
    (spark.readStream.schema("body string").json(incoming).writeStream.format("sbqueue")
     .option("namespace", root).option("entity", "audit")
     .option("checkpointLocation", root + "-checkpoint").trigger(availableNow=True).start()
     .awaitTermination())
    read = spark.read.format("sbqueue").option("namespace", root).option("entity", "audit")
    out["read"] = sorted(r.body.decode() for r in read.load().select("body").collect())
    drained = root + "-drained"
    (spark.readStream.format("sbqueue").option("namespace", root).option("entity", "audit")
     .load().select("body").writeStream.format("delta")
     .option("checkpointLocation", root + "-checkpoint-2").trigger(availableNow=True)
     .start(drained).awaitTermination())
    out["drained"] = sorted(r.body.decode() for r in
                            spark.read.format("delta").load(drained).collect())
    out["audit_left"] = admin.get_queue_runtime_properties("audit").total_message_count
    print("RESULT " + json.dumps(out))
    """
)


def _script(name: str) -> Path:
    """An entry point installed beside this interpreter."""
    return Path(sys.executable).parent / name


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[str]:
    """A Spark Connect server from the pip pyspark, with sbqueue's properties file."""
    import pyspark

    properties = subprocess.run([str(_script("sbqueue")), "spark-conf"],
                                capture_output=True, text=True, check=True).stdout.strip()
    port = free_port()
    log = tmp_path / "server.log"
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    with open(log, "w") as handle:
        server = subprocess.Popen(
            [str(submit), "--properties-file", properties,
             "--conf", f"spark.connect.grpc.binding.port={port}",
             "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"],
            stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert listening(port, 300, lambda: server.poll() is None, pause=1), \
            log.read_text()[-3000:]
        yield f"sc://localhost:{port}"
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


def test_issue19_point1_sbqueue_runs_through_spark_connect(connect_server: str,
                                                           tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "SPARK_REMOTE": connect_server}
    for name in ("PYSPARK_GATEWAY_PORT", "SBQUEUE_EXECUTOR", "SBQUEUE_DRIVER_READS"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "ns"),
                           str(_script("sbqueue-forward"))], env=env,
                          capture_output=True, text=True, timeout=1200, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    out = json.loads(line[len("RESULT "):])
    assert out["session"].startswith("pyspark.sql.connect")
    assert out["executor"] == "spark"  # told from the session (issue 43)
    assert out["client"] == ["m0", "m1", "m2"]
    assert out["dataframe"] == ["d0", "d1", "d2", "d3"] and out["settled"] == 4
    assert out["view"] == 0  # every message settled
    assert out["subscription"] == 2  # the SQL filter let the red ones in
    assert out["forward_rc"] == 0, out["forward_err"]
    assert out["forwarded"] == ["red", "red"]
    assert out["as_of"] == ["m0", "m1", "m2"] and out["replayed"] == 3
    assert out["read"] == ["m0", "m1", "m2", "s0", "s1"]  # issue 22 points 1 and 3
    assert out["drained"] == out["read"] and out["audit_left"] == 0  # point 2
