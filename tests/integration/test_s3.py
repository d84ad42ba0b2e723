"""Issue 44: a namespace on S3 (a moto server process on 127.0.0.1), served by the local
executor: delta-rs reads, the driver's commits put only where no object is (conditional
writes, ``store.objects``), the catalog as objects. No mock of a client library: the
server speaks S3 over HTTP, as a bucket would."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from sender_race import EXPECTED, drain, send_from_three_processes

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store.documents import DocumentConflict, DocumentExists, open_document_store
from sbqueue.store.logfiles import commit_actions, has_commit, log_files

pytestmark = [pytest.mark.spark]


@pytest.mark.local_executor  # no Spark job: what only the local executor does
def test_s1_a_client_round_trip_on_s3_runs_on_the_driver(
        spark: Any, s3_root: str, spark_jobs: Any) -> None:
    """Create, send, receive, complete and count on ``s3a://`` (the same namespace as
    ``s3://``), each without a Spark job: the local executor serves S3."""
    root = s3_root.replace("s3://", "s3a://")
    admin = ServiceBusAdministrationClient(root, spark=spark)
    _, jobs_create = spark_jobs(lambda: admin.create_queue("q", lock_duration="PT1M"))
    client = ServiceBusClient(root, spark=spark)
    with client.get_queue_sender("q") as sender, \
            client.get_queue_receiver("q", max_wait_time=5) as receiver:
        _, jobs_send = spark_jobs(lambda: sender.send_messages(
            [ServiceBusMessage(f"m{i}") for i in range(3)]))
        got, jobs_receive = spark_jobs(lambda: receiver.receive_messages(2))
        _, jobs_complete = spark_jobs(lambda: receiver.complete_message(got[0]))
    assert [str(m) for m in got] == ["m0", "m1"]  # S5.5: in order
    props = ServiceBusAdministrationClient(s3_root, spark=spark).get_queue_runtime_properties("q")
    assert props.active_message_count == 2  # one completed; the other locked stays active
    assert Namespace(s3_root, spark).executor == "local"
    assert (jobs_create, jobs_send, jobs_receive, jobs_complete) == (0, 0, 0, 0)


def test_the_driver_commits_claim_each_version_once(spark: Any, s3_root: str) -> None:
    """Each send is one commit, published where no object was: versions 1.. in order,
    each written once, each holding its send."""
    admin = ServiceBusAdministrationClient(s3_root, spark=spark)
    admin.create_queue("q")
    with ServiceBusClient(s3_root, spark=spark).get_queue_sender("q") as sender:
        for i in range(4):
            sender.send_messages(ServiceBusMessage(f"m{i}"))
    entity = Namespace(s3_root, spark).entity("q")
    log = log_files(entity.inbox.path)
    assert all(has_commit(log, v) for v in range(5)) and not has_commit(log, 5)
    added = [sum("add" in a for a in commit_actions(log, v)) for v in range(1, 5)]
    assert added == [1, 1, 1, 1]
    assert not log.put_if_absent("00000000000000000004.json", b"{}")  # taken: refused


def test_s1_1_the_catalog_on_s3_creates_once_and_replaces_what_was_read(s3_root: str) -> None:
    store = open_document_store(s3_root)
    store.create("a/x", {"n": 1})
    with pytest.raises(DocumentExists):
        store.create("a/x", {"n": 2})
    doc, token = store.read_versioned("a/x") or ({}, "")
    assert doc == {"n": 1}
    store.replace("a/x", {"n": 3}, token)
    with pytest.raises(DocumentConflict):
        store.replace("a/x", {"n": 4}, token)  # what was read changed since
    assert store.list("a") == ["a/x"]
    assert store.delete("a/x") is True
    assert store.read("a/x") is None and store.list("a") == []
    store.create("a/x", {"n": 5})  # a deleted name can be created again
    assert store.read("a/x") == {"n": 5}
    assert store.delete("a/x") is True
    store.replace("a/x", {"n": 6})  # an unconditional replace writes over a deletion too
    assert store.read("a/x") == {"n": 6}


def test_s1_1_a_queue_created_twice_on_s3_is_the_sdks_exists_error(
        spark: Any, s3_root: str) -> None:
    from azure.core.exceptions import ResourceExistsError

    admin = ServiceBusAdministrationClient(s3_root, spark=spark)
    admin.create_queue("q")
    with pytest.raises(ResourceExistsError):
        admin.create_queue("q")
    assert [q.name for q in admin.list_queues()] == ["q"]


@pytest.mark.slow
def test_senders_in_three_processes_lose_nothing_on_s3(
        spark: Any, s3_root: str, tmp_path: Any) -> None:
    """Three processes send 10 batches each to one S3 queue at once: each version is
    claimed by exactly one commit (conditional writes), so every row survives, once."""
    ServiceBusAdministrationClient(s3_root, spark=spark).create_queue("q")
    send_from_three_processes(s3_root, tmp_path)
    entity = Namespace(s3_root, spark).entity("q")
    log = log_files(entity.inbox.path)
    versions = [v for v in range(0, 40) if has_commit(log, v)]
    assert versions == list(range(31))  # the create and 30 sends, none lost or doubled
    bodies = drain(s3_root, spark)
    assert sorted(bodies) == EXPECTED
    assert json.dumps(sorted(set(bodies))) == json.dumps(sorted(bodies))  # each once


@pytest.mark.parametrize("setup", ["bucket missing", "wrong endpoint", "no credentials"])
def test_a_bad_s3_setup_is_one_clear_error_without_secrets(
        spark: Any, s3_root: str, s3_endpoint: str, setup: str,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """S1.1: one line naming what to fix (the variable, never its value), nothing made."""
    from s3_server import SECRET_KEY, aws_env

    from sbqueue.exceptions import ServiceBusConnectionError

    root, words = s3_root, {"bucket missing": "bucket does not exist",
                            "wrong endpoint": "AWS_ENDPOINT_URL",
                            "no credentials": "AWS_SECRET_ACCESS_KEY"}[setup]
    if setup == "bucket missing":
        root = s3_root.replace("sbq-test", "sbq-no-such-bucket")
    elif setup == "wrong endpoint":
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    else:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    caplog.set_level("DEBUG")
    with pytest.raises(ServiceBusConnectionError) as err:
        ServiceBusAdministrationClient(root, spark=spark).create_queue("q")
    text = str(err.value)
    assert words in text and "\n" not in text and "Traceback" not in text
    assert SECRET_KEY not in text and SECRET_KEY not in caplog.text
    for key, value in aws_env(s3_endpoint).items():  # the real setup: nothing was made
        monkeypatch.setenv(key, value)
    if setup != "bucket missing":
        assert ServiceBusAdministrationClient(root, spark=spark).list_queues() == []


_NO_S3A_PROGRAM = textwrap.dedent("""
    import sys
    from sbqueue import Namespace
    from sbqueue.exceptions import ServiceBusError
    from sbqueue.spark import get_session
    spark = get_session()  # a session of one's own, built without S3A
    queue = Namespace(sys.argv[1], spark).entity("q")
    for step in (lambda: queue.send_dataframe(spark.range(3).selectExpr("'x' AS body")),
                 lambda: queue.peek_dataframe(5).count()):
        try:
            step()
            print("no error")
        except ServiceBusError as exc:
            print(type(exc).__name__, str(exc).replace(chr(10), " "))
""")


@pytest.mark.slow
def test_a_session_without_s3a_is_one_clear_error_and_writes_nothing(
        s3_root: str, tmp_path: Any) -> None:
    """Issue 44 point 5: a program's own session without S3A (jars missing) on an S3
    namespace: a DataFrame send is refused before it writes (the session cannot claim
    versions as the other writers do), a DataFrame read names the missing jars; each is
    one line naming the fix."""
    ServiceBusAdministrationClient(s3_root).create_queue("q")
    script = tmp_path / "program.py"
    script.write_text(_NO_S3A_PROGRAM)
    done = subprocess.run([sys.executable, str(script), s3_root], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    send, read = done.stdout.strip().splitlines()[-2:]
    assert send.startswith("StorageFailureError") and "put-if-absent" in send, send
    assert "spark-conf --store s3" in send and "nothing was written" in send
    assert read.startswith("StorageFailureError") and "S3A jars" in read, read
    assert "Traceback" not in done.stdout
    props = ServiceBusAdministrationClient(s3_root).get_queue_runtime_properties("q")
    assert props.active_message_count == 0


@pytest.mark.slow
def test_the_readmes_s3_example_runs_as_a_new_user_runs_it(s3_root: str, s3_endpoint: str,
                                                            tmp_path: Any) -> None:
    """Issue 44's first "done when": the AWS variables set, the README's S3 example run as
    a program of its own, served by the local executor."""
    import os
    import re
    from pathlib import Path

    from s3_server import aws_env

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### Object storage"):]
    code = re.search(r"python3 - <<'PY'\n(.*?)\nPY\n", section, re.S)
    assert code is not None
    script = tmp_path / "example.py"
    script.write_text(code.group(1).replace("s3://my-bucket/sbqueue", s3_root) + textwrap.dedent("""
        from sbqueue import Namespace
        print(Namespace(root).executor,
              ServiceBusAdministrationClient(root).get_queue_runtime_properties(
                  "orders").active_message_count)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **aws_env(s3_endpoint)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["local", "0"]


_WORKER = textwrap.dedent("""
    import sys
    from sbqueue import ServiceBusClient
    root = sys.argv[1]
    with ServiceBusClient(root).get_queue_receiver("q", max_wait_time=5) as receiver:
        while batch := receiver.receive_messages(2):
            for m in batch:
                print("completing", m, flush=True)
                receiver.complete_message(m)
                print("completed", m, flush=True)
""")


@pytest.mark.slow
def test_a_receiver_killed_on_s3_loses_nothing(spark: Any, s3_root: str, tmp_path: Any
                                               ) -> None:
    """Nothing is ever lost: a receiving process SIGKILLed mid-work on an S3 namespace
    leaves each message completed (as it said, or the one it was completing) or back in
    the queue once its lock ran out, never both and never neither."""
    import signal
    import time

    admin = ServiceBusAdministrationClient(s3_root, spark=spark)
    admin.create_queue("q", lock_duration="PT5S", max_delivery_count=10)
    bodies = {f"m{i}" for i in range(40)}
    with ServiceBusClient(s3_root, spark=spark).get_queue_sender("q") as sender:
        sender.send_messages([ServiceBusMessage(b) for b in sorted(bodies)])
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    out = tmp_path / "worker.out"
    with open(out, "w") as sink:
        worker = subprocess.Popen([sys.executable, str(script), s3_root], stdout=sink,
                                  stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while out.read_text().count("completed") < 12 and time.monotonic() < deadline:
            assert worker.poll() is None, "the worker ended before it was killed"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
    lines = out.read_text().splitlines()
    done = {line.split(" ", 1)[1] for line in lines if line.startswith("completed ")}
    trying = {line.split(" ", 1)[1] for line in lines if line.startswith("completing ")}
    time.sleep(6)  # its locks run out (5 s)
    got = drain(s3_root, spark)
    assert len(done) >= 12 and not done & set(got) and len(got) == len(set(got))
    lost = bodies - done - set(got)
    assert lost <= trying - done and len(lost) <= 1  # only the one it was completing


@pytest.mark.slow
def test_the_cli_on_an_s3_namespace(s3_root: str, s3_endpoint: str) -> None:
    """``--namespace s3a://...`` for the CLI's client commands, each a process of its own
    that exits cleanly (no abort while the interpreter finalizes, decision 033)."""
    import os

    from s3_server import aws_env

    root = s3_root.replace("s3://", "s3a://")
    env = {**os.environ, **aws_env(s3_endpoint)}

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "sbqueue.cli", *args], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and "terminate called" not in done.stderr, (
            args, done.returncode, done.stderr[-2000:])
        return done.stdout

    cli("queue", "create", "orders", "--namespace", root)
    cli("send", "--namespace", root, "orders", "hello")
    cli("send", "--namespace", root, "orders", "world")
    assert "world" in cli("peek", "--namespace", root, "orders")
    assert "hello" in cli("receive", "--namespace", root, "orders", "--max", "1")
    stats = cli("stats", "--namespace", root)
    assert "orders" in stats and "executor: local" in stats
    assert "orders" in cli("queue", "list", "--namespace", root)


_AWS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
        "AWS_REGION", "AWS_PROFILE")


def _round_trip(root: str, spark: Any = None) -> list[str]:
    ServiceBusAdministrationClient(root, spark=spark).create_queue("q")
    with ServiceBusClient(root, spark=spark).get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("via the session"))
    return drain(root, spark)


def test_a_session_s_s3a_confs_serve_the_driver_too(
        spark: Any, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44 point 1: a user who configured S3 only in the session's
    ``spark.hadoop.fs.s3a.*`` confs (no AWS variable) gets the local executor's reads and
    commits on that store: one setting serves Spark and the driver."""
    from s3_server import ACCESS_KEY, SECRET_KEY, fresh_root

    for name in _AWS:
        monkeypatch.setenv(name, "")  # unset, and put back after the test
    confs = {"endpoint": s3_endpoint.removeprefix("http://"),
             "connection.ssl.enabled": "false", "access.key": ACCESS_KEY,
             "secret.key": SECRET_KEY, "endpoint.region": "us-east-1"}
    try:
        for key, value in confs.items():
            spark.conf.set(f"spark.hadoop.fs.s3a.{key}", value)
        assert _round_trip(fresh_root(), spark) == ["via the session"]
    finally:
        for key in confs:
            spark.conf.unset(f"spark.hadoop.fs.s3a.{key}")


_PROFILE_PROGRAM = textwrap.dedent("""
    import os, sys
    sys.path[:0] = [sys.argv[2], os.path.dirname(sys.argv[2])]  # the tests' helpers too
    from test_s3 import _round_trip
    print(_round_trip(sys.argv[1]))
""")


def test_a_named_aws_profile_serves_an_s3_namespace(s3_endpoint: str, tmp_path: Any) -> None:
    """Issue 44 point 1: ``AWS_PROFILE`` names the keys (in the shared credentials file) and
    region; a client program with no key in its environment, and no JVM, uses them."""
    import os
    from pathlib import Path

    from s3_server import ACCESS_KEY, SECRET_KEY, fresh_root

    (tmp_path / "credentials").write_text(
        f"[moto]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
    (tmp_path / "config").write_text("[profile moto]\nregion = us-east-1\n")
    env = {k: v for k, v in os.environ.items() if k not in _AWS}
    env.update(AWS_PROFILE="moto", AWS_ENDPOINT_URL=s3_endpoint,
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"),
               AWS_CONFIG_FILE=str(tmp_path / "config"))
    script = tmp_path / "program.py"
    script.write_text(_PROFILE_PROGRAM)
    done = subprocess.run([sys.executable, str(script), fresh_root(),
                           str(Path(__file__).resolve().parent)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "['via the session']"


@pytest.mark.local_executor  # the driver's requests: the Spark executor's are S3A's
def test_issue_44_a_client_loop_asks_the_store_a_few_requests_an_operation(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44 point 6, issue 45 (decision 050): on S3 each request is paid, so a client
    loop keeps its looks few: a send and a complete 4 requests or fewer, a one-message
    receive 7 (before: 11, 8 and 22). Counted by a moto server of the test's own from its
    access log (one line a request). The pauses that let the server write its lines make
    a round last ~0.4 s, so completion records would come due for their fold
    (``FOLD_AGE``) and a receive would put one file more for them: not counted here."""
    import time
    from datetime import timedelta

    from s3_server import aws_env, fresh_root, make_bucket, moto_server

    from sbqueue.engine import records

    monkeypatch.setattr(records, "FOLD_AGE", timedelta(minutes=10))

    log = tmp_path / "moto.log"
    with moto_server(log) as endpoint:
        make_bucket(endpoint)
        for key, value in aws_env(endpoint).items():
            monkeypatch.setenv(key, value)
        root = fresh_root()

        def requests() -> int:
            time.sleep(0.1)  # the server writes its line after it answered
            return sum(1 for line in log.read_text(errors="replace").splitlines()
                       if '" 2' in line or '" 3' in line or '" 4' in line)

        ServiceBusAdministrationClient(root).create_queue(
            "q", enable_partitioning=True, lock_duration="PT5M")
        counts: dict[str, list[int]] = {"send": [], "receive": [], "complete": []}
        with ServiceBusClient(root) as client, client.get_queue_sender("q") as sender, \
                client.get_queue_receiver("q", max_wait_time=5) as receiver:
            for round_ in range(8):
                before = requests()
                sender.send_messages(ServiceBusMessage(f"m{round_}"))
                sent = requests()
                (got,) = receiver.receive_messages(1)
                received = requests()
                receiver.complete_message(got)
                if round_ >= 2:  # the first rounds load each table's state once
                    counts["send"].append(sent - before)
                    counts["receive"].append(received - sent)
                    counts["complete"].append(requests() - received)
    assert max(counts["send"]) <= 4 and max(counts["complete"]) <= 4, counts
    assert max(counts["receive"]) <= 7, counts
