"""Issue 44 points 1-2 (decision 042): Spark on an S3 namespace (the moto server process on
127.0.0.1), beside the driver's commits and delta-rs. Spark's session gets S3A and
sbqueue's put-if-absent log store, so every writer of a table claims a version the same
way: a conditional write of its commit file. Each Spark here is a process of its own, as
a user's job is; the test process itself starts no JVM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from sbqueue import Namespace, ServiceBusClient
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store.logfiles import commit_actions, has_commit, log_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Each writer's rounds: enough that the quick ones are still writing while Spark commits.
SPARK_ROUNDS, RS_ROUNDS, CLIENT_ROUNDS = 6, 30, 20

_SPARK = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from sbqueue import Namespace
    root, plain, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    ns = Namespace(root)            # no session given: sbqueue starts one with S3A
    spark = ns.spark.resolve()
    queue = ns.entity("q")
    spark.range(1).count()          # the JVM is warm before the race starts
    (folder / "ready").touch()
    while not (folder / "go").exists():
        time.sleep(0.05)
    for i in range({rounds}):
        rows = [(f"spark-{{i}}-{{k}}", "spark") for k in range(5)]
        spark.createDataFrame(rows, "body string, writer string").write.format(
            "delta").mode("append").save(plain)
        queue.send_dataframe(spark.createDataFrame(rows, "body string, writer string")
                             .select("body"))
    ns.register_views()
    print("view", spark.sql(f"SELECT count(*) FROM {{ns.sql_name('q')}}").first()[0])
""").format(rounds=SPARK_ROUNDS)

_DELTA_RS = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import pyarrow as pa
    from deltalake import write_deltalake
    plain, who, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    options = {{"AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"], "AWS_ALLOW_HTTP": "true",
               "AWS_REGION": os.environ["AWS_REGION"]}}
    while not (folder / "go").exists():
        time.sleep(0.05)
    for i in range({rounds}):
        rows = pa.table({{"body": [f"{{who}}-{{i}}-{{k}}" for k in range(3)],
                         "writer": ["delta-rs"] * 3}})
        write_deltalake(plain, rows, mode="append", storage_options=options)
        time.sleep(0.2)
""").format(rounds=RS_ROUNDS)

_CLIENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from sbqueue import ServiceBusClient, ServiceBusMessage
    root, who, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    with ServiceBusClient(root).get_queue_sender("q") as sender:
        while not (folder / "go").exists():
            time.sleep(0.05)
        for i in range({rounds}):
            sender.send_messages([ServiceBusMessage(f"{{who}}-{{i}}-{{k}}") for k in range(3)])
            time.sleep(0.2)
""").format(rounds=CLIENT_ROUNDS)


def _engines(path: str, versions: list[int]) -> list[str]:
    """Which writer made each commit (its ``commitInfo.engineInfo``), in version order."""
    log = log_files(path)
    found = []
    for version in versions:
        info = [a["commitInfo"] for a in commit_actions(log, version) if "commitInfo" in a]
        found.append(str(info[0].get("engineInfo", "")) if info else "")
    return found


def _kind(engine: str) -> str:
    for kind in ("Apache-Spark", "sbqueue-driver", "delta-rs"):
        if kind.lower() in engine.lower():
            return kind
    return engine


def _interleaved(kinds: list[str], kind: str) -> bool:
    """Whether another writer committed between ``kind``'s first and last commits."""
    at = [n for n, k in enumerate(kinds) if k == kind]
    return len(at) > 1 and any(k != kind for k in kinds[at[0]:at[-1]])


def _drain(root: str, queue: str) -> list[str]:
    """Receive and complete every message of ``queue``; their bodies."""
    got: list[str] = []
    with ServiceBusClient(root).get_queue_receiver(queue, max_wait_time=5) as receiver:
        while batch := receiver.receive_messages(100):
            got += [str(m) for m in batch]
            for m in batch:
                receiver.complete_message(m)
    return got


def _run(script: Path, *args: str, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(script), *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def test_spark_delta_rs_and_the_driver_race_on_s3_and_every_commit_survives(
        s3_root: str, tmp_path: Path) -> None:
    """Issue 44 point 2: from separate processes at once, a Spark job appends to a plain
    Delta table and sends DataFrames to a queue, two delta-rs programs append to the plain
    table, two client programs send to the queue (the driver's own commits). Every
    version is claimed by one commit, each writer's commits land between the others',
    and every row survives exactly once; the Spark job's SQL view counts the queue."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    ServiceBusAdministrationClient(s3_root).create_queue("q")
    plain = f"{s3_root}/plain"
    options = {"AWS_ALLOW_HTTP": "true"}
    write_deltalake(plain, pa.table({"body": pa.array([], pa.string()),
                                     "writer": pa.array([], pa.string())}),
                    storage_options=options)
    scripts = {}
    for name, text in (("spark", _SPARK), ("rs", _DELTA_RS), ("client", _CLIENT)):
        scripts[name] = tmp_path / f"{name}.py"
        scripts[name].write_text(text)
    spark = _run(scripts["spark"], s3_root, plain.replace("s3://", "s3a://"), str(tmp_path))
    others = [_run(scripts["rs"], plain, f"rs{n}", str(tmp_path)) for n in range(2)]
    others += [_run(scripts["client"], s3_root, f"c{n}", str(tmp_path)) for n in range(2)]
    deadline = time.monotonic() + 600
    while not (tmp_path / "ready").exists():
        assert spark.poll() is None, spark.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the Spark job did not start"
        time.sleep(0.1)
    (tmp_path / "go").touch()
    outputs = {}
    for n, proc in enumerate([spark, *others]):
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        outputs[n] = out

    appends = 1 + SPARK_ROUNDS + 2 * RS_ROUNDS
    log = log_files(f"{plain}")
    versions = [v for v in range(appends + 5) if has_commit(log, v)]
    assert versions == list(range(appends))  # none lost, none doubled
    kinds = [_kind(e) for e in _engines(plain, versions[1:])]
    assert kinds.count("Apache-Spark") == SPARK_ROUNDS and kinds.count("delta-rs") == 2 * RS_ROUNDS
    assert _interleaved(kinds, "Apache-Spark")  # a race, not one writer after another
    rows = DeltaTable(plain, storage_options=options).to_pyarrow_table().to_pylist()
    expected = ({f"spark-{i}-{k}" for i in range(SPARK_ROUNDS) for k in range(5)}
                | {f"rs{n}-{i}-{k}" for n in range(2) for i in range(RS_ROUNDS)
                   for k in range(3)})
    assert sorted(r["body"] for r in rows) == sorted(expected)

    inbox = Namespace(s3_root).entity("q").inbox.path
    sends = 1 + SPARK_ROUNDS + 2 * CLIENT_ROUNDS
    inbox_log = log_files(inbox)
    inbox_versions = [v for v in range(sends + 5) if has_commit(inbox_log, v)]
    assert inbox_versions == list(range(sends))
    queue_kinds = [_kind(e) for e in _engines(inbox, inbox_versions[1:])]
    assert queue_kinds.count("Apache-Spark") == SPARK_ROUNDS
    assert queue_kinds.count("sbqueue-driver") == 2 * CLIENT_ROUNDS
    sent = ({f"spark-{i}-{k}" for i in range(SPARK_ROUNDS) for k in range(5)}
            | {f"c{n}-{i}-{k}" for n in range(2) for i in range(CLIENT_ROUNDS)
               for k in range(3)})
    assert outputs[0].split()[-2:] == ["view", str(len(sent))]
    got = _drain(s3_root, "q")
    assert sorted(got) == sorted(sent)
    assert json.dumps(sorted(set(got))) == json.dumps(sorted(got))  # each once


def test_the_demo_runs_on_an_s3_namespace(s3_root: str) -> None:
    """Issue 44 point 1: ``sbqueue demo --namespace s3://...`` as a user runs it, with the
    AWS environment set: its DataFrame send, receive and complete go through Spark (S3A,
    the put-if-absent log store), its client tour through the local executor, and the
    queue it leaves is what the local executor reads."""
    done = subprocess.run(
        [sys.executable, "-m", "sbqueue.cli", "demo", "--namespace", s3_root,
         "--messages", "300", "--batch", "100"],
        capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "Traceback" not in done.stderr
    props = ServiceBusAdministrationClient(s3_root).get_queue_runtime_properties("demo-orders")
    assert props.active_message_count == 0 and props.dead_letter_message_count == 0
    inbox = Namespace(s3_root).entity("demo-orders").inbox.path
    log = log_files(inbox)
    kinds = {_kind(e) for e in _engines(inbox, [v for v in range(1, 30) if has_commit(log, v)])}
    assert "Apache-Spark" in kinds  # the DataFrame send was Spark's commit on S3


_PROBE = textwrap.dedent("""
    import sys
    from sbqueue import Namespace
    from sbqueue.spark.logstore import PUT_IF_ABSENT_CLASS
    root, taken, free = sys.argv[1:4]
    spark = Namespace(root).spark.resolve()
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    conf.set("fs.s3a.create.performance", "true")  # S3A looks at nothing before a create
    conf.set("fs.s3a.impl.disable.cache", "true")
    store = getattr(jvm, PUT_IF_ABSENT_CLASS.rsplit(".", 1)[0]).PutIfAbsentLogStore(conf)

    def write(key, line):
        lines = jvm.java.util.ArrayList()
        lines.add(line)
        try:
            store.write(jvm.org.apache.hadoop.fs.Path(key), lines.iterator(), False, conf)
            return "written"
        except Exception as exc:
            return "refused" if "FileAlreadyExistsException" in str(exc) else repr(exc)

    print(write(taken, '{"spark":1}'), write(free, '{"spark":2}'), write(free, '{"spark":3}'),
          write(free, '{"spark":2}'))
""")


def test_the_spark_log_store_claims_a_version_by_a_conditional_write(
        s3_root: str, s3_endpoint: str, tmp_path: Path) -> None:
    """Decision 042: the put-if-absent log store refuses a commit file another writer put,
    by the store's conditional write itself (S3A's check before a create turned off, so
    only If-None-Match: * can refuse), and the object keeps the other writer's bytes.
    Decision 052: a refused write whose object holds its own bytes (a retried PUT whose
    first try landed, its answer lost) is its commit, not a loss: taken as a loss, Delta
    committed the same actions again at the next version (the 20-minute S3 soak)."""
    import boto3
    from s3_server import ACCESS_KEY, BUCKET, SECRET_KEY

    client = boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name="us-east-1")
    prefix = s3_root.split(f"{BUCKET}/", 1)[1] + "/t/_delta_log/"
    client.put_object(Bucket=BUCKET, Key=prefix + "00000000000000000001.json",
                      Body=b'{"other":1}\n')
    script = tmp_path / "probe.py"
    script.write_text(_PROBE)
    base = s3_root.replace("s3://", "s3a://") + "/t/_delta_log/"
    done = subprocess.run([sys.executable, str(script), s3_root,
                           base + "00000000000000000001.json", base + "00000000000000000002.json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-4:] == ["refused", "written", "refused", "written"]

    def body(version: int) -> bytes:
        got = client.get_object(Bucket=BUCKET, Key=prefix + f"{version:020d}.json")
        return bytes(got["Body"].read())

    assert body(1) == b'{"other":1}\n' and body(2) == b'{"spark":2}\n'


_JOB = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    from sbqueue import Namespace
    spark = SparkSession.builder.getOrCreate()   # spark-submit's, used as is
    queue = Namespace(sys.argv[1], spark).entity("q")
    print("sent", queue.send_dataframe(
        spark.range(20).selectExpr("CONCAT('job-', CAST(id AS STRING)) AS body")).count)
""")


def test_a_spark_submit_job_with_the_s3_properties_file_sends_to_s3(
        s3_root: str, tmp_path: Path) -> None:
    """Issue 44 point 1: ``sbqueue spark-conf --store s3`` writes what spark-submit needs
    for an S3 namespace (S3A, the put-if-absent log store, the AWS environment's endpoint;
    no credential), and a job submitted with it sends a DataFrame there."""
    import pyspark
    from s3_server import ACCESS_KEY, SECRET_KEY

    sbqueue = Path(sys.executable).parent / "sbqueue"
    properties = subprocess.run([str(sbqueue), "spark-conf", "--store", "s3"],
                                capture_output=True, text=True, check=True).stdout.strip()
    text = Path(properties).read_text()
    assert "PutIfAbsentLogStore" in text and os.environ["AWS_ENDPOINT_URL"] in text
    assert ACCESS_KEY not in text and SECRET_KEY not in text
    ServiceBusAdministrationClient(s3_root).create_queue("q")
    job = tmp_path / "job.py"
    job.write_text(_JOB)
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    done = subprocess.run([str(submit), "--master", "local[1]", "--properties-file", properties,
                           str(job), s3_root], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sent 20" in done.stdout
    props = ServiceBusAdministrationClient(s3_root).get_queue_runtime_properties("q")
    assert props.active_message_count == 20


def test_the_jobs_and_replay_run_on_an_s3_namespace(s3_root: str) -> None:
    """Issue 44 point 4: the jobs as the CLI runs them on an S3 namespace (the maintain
    job's VACUUM is Spark's, on S3A): the forward job moves every message, a replay of the
    source as of its send (Delta time travel) sends them again, maintenance vacuums each
    table, and nothing is lost."""
    from sbqueue import ServiceBusMessage

    admin = ServiceBusAdministrationClient(s3_root)
    admin.create_queue("dest")
    admin.create_queue("src", forward_to="dest")
    admin.create_queue("again")
    with ServiceBusClient(s3_root).get_queue_sender("src") as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(10)])
    reports = {}
    for job, *args in (("forward",), ("replay", "src", "--as-of", "1", "--to", "again",
                                       "--json"), ("maintain",)):
        done = subprocess.run([sys.executable, "-m", "sbqueue.cli", job, "--namespace", s3_root,
                               *args], capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        reports[job] = json.loads(done.stdout[done.stdout.index("{"):])
    assert reports["replay"]["sent"] == 10
    assert reports["forward"]["forwarded"] == 10 and not reports["forward"]["failed"]
    maintained = {e["path"]: e for e in reports["maintain"]["entities"]}
    assert all(e["error"] is None and e["tables_vacuumed"] > 0 for e in maintained.values())
    assert admin.get_queue_runtime_properties("src").active_message_count == 0
    assert admin.get_queue_runtime_properties("dest").active_message_count == 10
    assert sorted(_drain(s3_root, "again")) == sorted(f"m{i}" for i in range(10))


_SOURCE_AND_SINK = textwrap.dedent("""
    import sys
    from sbqueue import Namespace
    from sbqueue.datasource import register
    root, checkpoint = sys.argv[1], sys.argv[2]
    spark = Namespace(root).spark.resolve()
    register(spark)
    print("batch", spark.read.format("sbqueue").option("namespace", root)
          .option("entity", "src").load().count())
    query = (spark.readStream.format("sbqueue").option("namespace", root)
             .option("entity", "src").load().select("body")
             .writeStream.format("sbqueue").option("namespace", root).option("entity", "dest")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination(300)
    print("streamed")
""")


def test_the_data_source_reads_and_streams_an_s3_namespace(s3_root: str, tmp_path: Path
                                                           ) -> None:
    """Issue 44 point 4: ``format("sbqueue")`` on an S3 namespace (its Python workers use
    the local executor there, with the AWS environment): a batch read sees every message,
    a stream from one queue to another moves each once (its checkpoint a local folder)."""
    from sbqueue import ServiceBusMessage

    admin = ServiceBusAdministrationClient(s3_root)
    admin.create_queue("src")
    admin.create_queue("dest")
    with ServiceBusClient(s3_root).get_queue_sender("src") as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(7)])
    script = tmp_path / "stream.py"
    script.write_text(_SOURCE_AND_SINK)
    done = subprocess.run([sys.executable, str(script), s3_root, str(tmp_path / "checkpoint")],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-3:] == ["batch", "7", "streamed"]
    assert admin.get_queue_runtime_properties("src").active_message_count == 0
    assert sorted(_drain(s3_root, "dest")) == sorted(f"m{i}" for i in range(7))
