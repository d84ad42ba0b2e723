"""Issue 45, point 4: a program the local executor serves starts no JVM.

Each program runs as a process of its own with ``JAVA_HOME`` pointing at a ``java`` that
only records that it was started: Spark's launcher runs it to start a JVM, so the record
says whether anything asked for Spark. The same program with a step that needs Spark (a
DataFrame) shows the fake is what Spark would run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.local_executor

_PROGRAM = textwrap.dedent("""
    import sys
    from pyspark import SparkContext
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.management import ServiceBusAdministrationClient, SqlRuleFilter

    conn = "Endpoint=" + sys.argv[1]
    admin = ServiceBusAdministrationClient.from_connection_string(conn)
    admin.create_queue("q", requires_session=False)
    admin.create_topic("t")
    admin.create_subscription("t", "big")
    admin.create_rule("t", "big", "amount", filter=SqlRuleFilter("amount > 10"))
    admin.delete_rule("t", "big", "$Default")
    admin.create_queue("gone")
    admin.delete_queue("gone")  # a delete drops a view only where a session holds one
    admin.create_topic("t2")
    admin.create_subscription("t2", "s")
    admin.delete_topic("t2")
    with ServiceBusClient.from_connection_string(conn) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages([ServiceBusMessage(f"m{n}") for n in range(3)])
        with client.get_topic_sender("t") as sender:
            sender.send_messages([ServiceBusMessage("small", application_properties={"amount": 1}),
                                  ServiceBusMessage("big", application_properties={"amount": 50})])
        with client.get_queue_receiver("q", max_wait_time=5) as receiver:
            got = receiver.receive_messages(3)
            for message in got:
                receiver.complete_message(message)
            peeked = receiver.peek_messages(5)
        with client.get_subscription_receiver("t", "big", max_wait_time=5) as receiver:
            fanned = [str(m) for m in receiver.receive_messages(5)]
    left = admin.get_queue_runtime_properties("q").active_message_count
    print(len(got), len(peeked), fanned, left, SparkContext._active_spark_context is None)
    if len(sys.argv) > 2:  # a step that needs Spark
        from sbqueue import Namespace
        Namespace(sys.argv[1]).entity("q").peek_dataframe().count()
""")


def _fake_java(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose only Java records each start in a file, and that file."""
    record = tmp_path / "java-started"
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\nexit 1\n")
    java.chmod(0o755)
    env = {key: value for key, value in os.environ.items()
           if key not in ("SBQUEUE_EXECUTOR", "SBQUEUE_DRIVER_READS", "SPARK_REMOTE",
                          "PYSPARK_GATEWAY_PORT")}
    return {**env, "JAVA_HOME": str(home)}, record


def _run(tmp_path: Path, root: str, *extra: str, env: dict[str, str] | None = None) -> Any:
    script = tmp_path / "program.py"
    script.write_text(_PROGRAM)
    return subprocess.run([sys.executable, str(script), root, *extra], capture_output=True,
                          text=True, timeout=300, env=env)


def test_a_client_program_on_a_local_folder_starts_no_jvm(tmp_path: Path) -> None:
    """Create, send to a queue and a topic with a SQL rule, receive, settle, peek, count:
    the local executor serves all of it, and no JVM is started."""
    env, record = _fake_java(tmp_path)
    done = _run(tmp_path, str(tmp_path / "ns"), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[0] == "3 0 ['big'] 0 True"
    assert not record.exists(), record.read_text()


def test_a_step_that_needs_spark_starts_it_then(tmp_path: Path) -> None:
    """The same program, then a DataFrame: Spark is started for that step (here the
    recording Java, which refuses), not before, and the failure names Spark's Java."""
    env, record = _fake_java(tmp_path)
    done = _run(tmp_path, str(tmp_path / "ns"), "dataframe", env=env)
    assert done.stdout.split("\n")[0] == "3 0 ['big'] 0 True"
    assert done.returncode != 0
    assert record.exists()


def test_a_client_program_on_s3_starts_no_jvm(tmp_path: Path, s3_root: str,
                                              s3_endpoint: str) -> None:
    """The same program on an S3 namespace (decision 040): no JVM either."""
    from s3_server import aws_env

    env, record = _fake_java(tmp_path)
    done = _run(tmp_path, s3_root, env={**env, **aws_env(s3_endpoint)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[0] == "3 0 ['big'] 0 True"
    assert not record.exists(), record.read_text()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _explore(root: str, env: dict[str, str], urls: list[str]) -> list[int]:
    """``sbqueue explorer`` (the interpreter's script) on ``root``: each URL's status,
    asked while it runs."""
    import socket
    import time
    import urllib.error
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    script = Path(sys.executable).parent / "sbqueue"
    process = subprocess.Popen([str(script), "explorer", "--namespace", root, "--port",
                                str(port)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert process.poll() is None and time.monotonic() < deadline, (
                process.communicate()[0][-2000:])
            time.sleep(0.1)
        statuses = []
        for url in urls:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{url}", timeout=120) as r:
                    statuses.append(r.status)
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)
        return statuses
    finally:
        process.terminate()
        process.wait(30)


def test_the_explorer_shows_a_local_namespace_without_a_jvm(tmp_path: Path) -> None:
    """Issue 46: its pages and /metrics are the engine's own reads, no JVM (the recording
    Java stays unstarted)."""
    env, record = _fake_java(tmp_path)
    root = str(tmp_path / "ns")
    assert _run(tmp_path, root, env=env).returncode == 0
    urls = ["/", "/fragments/entities", "/entity?path=q", "/entity?path=t",
            "/entity?path=t/Subscriptions/big", "/messages?path=t/Subscriptions/big",
            "/messages?path=q&dlq=1", "/metrics"]
    assert _explore(root, env, urls) == [200] * len(urls)
    assert not record.exists(), record.read_text()


@pytest.mark.slow  # Azurite: an npm package installed once per machine, a server process
def test_a_client_program_on_azure_blob_starts_no_jvm(tmp_path: Path, az_root: str,
                                                      azurite_endpoint: str) -> None:
    """The same program on an Azure Blob namespace (Azurite, decision 051): no JVM."""
    from az_server import azure_env

    env, record = _fake_java(tmp_path)
    done = _run(tmp_path, az_root, env={**env, **azure_env(azurite_endpoint)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[0] == "3 0 ['big'] 0 True"
    assert not record.exists(), record.read_text()
