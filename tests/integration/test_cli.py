"""The command line, in-process on the shared session (S1.7 errors, admin commands)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sbqueue.cli import main
from sbqueue.exceptions import InvalidOperationError

pytestmark = pytest.mark.spark


def test_cli_queue_topic_and_subscription_commands(spark, namespace_root) -> None:
    runner = CliRunner()
    ns = ["--namespace", namespace_root]
    result = runner.invoke(main, ["queue", "create", *ns, "orders", "enable_partitioning=true",
                                  "max_delivery_count=3"])
    assert result.exit_code == 0, result.output
    assert "16 partition(s)" in result.output
    listed = runner.invoke(main, ["queue", "list", *ns])
    assert "orders" in listed.output
    shown = runner.invoke(main, ["queue", "show", *ns, "ORDERS", "--runtime"])
    assert "max_delivery_count" in shown.output and "total_message_count" in shown.output
    assert runner.invoke(main, ["topic", "create", *ns, "events"]).exit_code == 0
    sub = runner.invoke(main, ["subscription", "create", *ns, "events", "audit"])
    assert "1 partition(s)" in sub.output
    assert "audit" in runner.invoke(main, ["subscription", "list", *ns, "events"]).output
    stats = runner.invoke(main, ["stats", *ns])
    assert stats.exit_code == 0 and "orders" in stats.output
    assert runner.invoke(main, ["queue", "delete", *ns, "orders"]).exit_code == 0
    assert "orders" not in runner.invoke(main, ["queue", "list", *ns]).output


def test_cli_bad_name_is_a_clear_error(spark, namespace_root) -> None:
    result = CliRunner().invoke(main, ["queue", "create", "--namespace", namespace_root,
                                       "../escape"])
    assert isinstance(result.exception, InvalidOperationError)
    assert "S1.7" in str(result.exception)


@pytest.mark.slow
def test_cli_send_peek_receive_and_stats(spark, namespace_root, tmp_path) -> None:
    """Issue 6 CLI: send (body, --file JSON lines), peek, receive --complete, stats --json."""
    import json

    runner = CliRunner()
    ns = ["--namespace", namespace_root]
    assert runner.invoke(main, ["queue", "create", *ns, "q"]).exit_code == 0
    sent = runner.invoke(main, ["send", *ns, "q", "hello", "-p", "n=5", "--subject", "s"])
    assert sent.exit_code == 0 and "sent 1" in sent.output, sent.output
    lines = tmp_path / "m.jsonl"
    lines.write_text('{"body": "a", "message_id": "m-a"}\n{"body": "b"}\n')
    assert "sent 2" in runner.invoke(main, ["send", *ns, "q", "--file", str(lines)]).output
    peeked = runner.invoke(main, ["peek", *ns, "q", "--max", "5", "--json"])
    rows = [json.loads(x) for x in peeked.output.splitlines()]
    assert [r["body"] for r in rows] == ["hello", "a", "b"]
    assert rows[0]["application_properties"] == {"n": 5} and rows[1]["message_id"] == "m-a"
    got = runner.invoke(main, ["receive", *ns, "q", "--max", "3", "--complete", "--json"])
    assert got.exit_code == 0 and len(got.output.splitlines()) == 3, got.output
    stats = json.loads(runner.invoke(main, ["stats", *ns, "--json"]).output)
    assert stats["queue"] == "q" and stats["total"] == 0 and stats["partitions"] == {"0": 0}


def _cli(args: list[str], env: dict[str, str]) -> object:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "sbqueue.cli", *args], env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_cli_reading_definitions_needs_no_spark(spark, namespace_root) -> None:
    """Issue 6: queue list / show answer without starting Spark (here: without Java)."""
    import os

    CliRunner().invoke(main, ["queue", "create", "--namespace", namespace_root, "orders"])
    env = {**os.environ, "JAVA_HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}
    listed = _cli(["queue", "list", "--namespace", namespace_root], env)
    assert listed.returncode == 0 and "orders" in listed.stdout, listed.stderr  # type: ignore[attr-defined]
    shown = _cli(["queue", "show", "--namespace", namespace_root, "orders"], env)
    assert "lock_duration" in shown.stdout  # type: ignore[attr-defined]


@pytest.mark.slow
def test_cli_is_quiet_when_it_starts_spark(namespace_root) -> None:
    """Issue 6: no Ivy report or Spark log lines on the terminal."""
    import os

    env = dict(os.environ)
    created = _cli(["queue", "create", "--namespace", namespace_root, "q"], env)
    sent = _cli(["send", "--namespace", namespace_root, "q", "hello"], env)
    for result in (created, sent):
        out = result.stdout + result.stderr  # type: ignore[attr-defined]
        assert result.returncode == 0, out  # type: ignore[attr-defined]
        assert ":: loading settings" not in out and "log level" not in out, out
    assert "sent 1" in sent.stdout  # type: ignore[attr-defined]


@pytest.mark.slow
def test_cli_names_a_python_worker_failure_and_its_interpreter(namespace_root, tmp_path
                                                              ) -> None:
    """Issue 17: workers that run an interpreter without sbqueue fail a keyed send; the CLI
    prints the worker's own exception, its message and the interpreter, in one line."""
    import os
    import subprocess
    import sys
    import venv

    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # a Python without sbqueue, pyspark or pandas
    python = str(bare / "bin" / "python")
    cli = [sys.executable, "-m", "sbqueue.cli", "--namespace", namespace_root]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PYSPARK_PYTHON"] = python  # the user's choice: kept, and named in the error
    # A client send to a local folder runs no Python worker (decision 015): the Spark send,
    # which routes keys in a vectorized UDF, is the path whose failure is named.
    env["SBQUEUE_DRIVER_COMMITS"] = "0"
    made = subprocess.run([*cli[:3], "queue", "create", *cli[3:], "q",
                           "enable_partitioning=true"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    sent = subprocess.run([*cli[:3], "send", *cli[3:], "q", "hello", "--session-id", "s1"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert sent.returncode == 1, sent.stdout + sent.stderr
    line = " ".join(sent.stdout.split())
    assert "ModuleNotFoundError: No module named" in line, sent.stdout
    assert "in Spark's Python workers" in line and python in line, sent.stdout
    assert "Traceback" not in sent.stdout and "py4j" not in sent.stdout
