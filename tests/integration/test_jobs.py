"""The jobs (issue 9): each runs under spark-submit against a local namespace (its own
JVM, the session spark-submit configured), and in-process with a clear one-line refusal
of bad input (exit code 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.jobs import dequeue, enqueue, forward, maintain, resubmit

# spark-submit resolves the Delta jars with Ivy in the shared cache: one worker at a time
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark-submit")]
REPO = Path(__file__).resolve().parents[2]


def spark_submit(job: str, *args: str, cwd: Path) -> dict[str, object]:
    """Run ``jobs/<job>.py`` with spark-submit (local[1]); its JSON summary."""
    from sbqueue.spark import submit_properties
    from sbqueue.spark.logstore import _pyspark_home

    tests = str(REPO / "tests")  # the user functions' module, as a user's package would be
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [str(_pyspark_home() / "bin" / "spark-submit"), "--master", "local[1]",
         "--properties-file", str(submit_properties()), str(REPO / "jobs" / f"{job}.py"),
         *args], capture_output=True, text=True, timeout=900, env=env, cwd=cwd)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    [line] = [x for x in result.stdout.splitlines() if x.startswith(f"sbqueue-{job} ")]
    summary: dict[str, object] = json.loads(line.split(" ", 1)[1])
    return summary


@pytest.mark.slow
def test_every_job_runs_under_spark_submit(admin, spark, namespace_root, tmp_path) -> None:
    """enqueue -> forward -> dequeue (one fails: dead-lettered) -> resubmit -> maintain,
    each a spark-submit of jobs/<name>.py with its own JVM."""
    admin.create_queue("out", max_delivery_count=1)
    admin.create_queue("in", enable_partitioning=True, forward_to="out")
    source = tmp_path / "rows.csv"
    source.write_text("id,payload\n" + "\n".join(f"r{i},{'bad' if i == 0 else i}"
                                                  for i in range(12)))
    sent = spark_submit("enqueue", "--namespace", namespace_root, "--entity", "in", "--path",
                        str(source), "--format", "csv", "--column", "body=payload",
                        "--column", "message_id=id", cwd=tmp_path)
    assert sent["sent"] == 12
    moved = spark_submit("forward", "--namespace", namespace_root, cwd=tmp_path)
    assert (moved["forwarded"], moved["runs"]) == (12, 1)
    sink = str(tmp_path / "sink")
    done = spark_submit("dequeue", "--namespace", namespace_root, "--entity", "out",
                        "--sink", sink, "--function", "dequeue_functions:upper",
                        "--on-failure", "dead-letter", cwd=tmp_path)
    assert (done["completed"], done["failed"]) == (11, 1)
    assert spark.read.format("delta").load(sink).count() == 11
    back = spark_submit("resubmit", "--namespace", namespace_root, "--entity", "out",
                        cwd=tmp_path)
    assert back["resubmitted"] == 1
    assert admin.namespace.entity("out").counts()["active"] == 1
    kept = spark_submit("maintain", "--namespace", namespace_root, "--entity", "in",
                        "--entity", "out", "--no-vacuum", cwd=tmp_path)
    assert [e["path"] for e in kept["entities"]] == ["in", "out"]  # type: ignore[index,union-attr]


def test_jobs_refuse_bad_input_in_one_line(admin, namespace_root, tmp_path, capsys) -> None:
    admin.create_queue("plain")
    cases = [
        (forward.main, ["--namespace", str(tmp_path / "nowhere")], "no namespace"),
        (forward.main, ["--namespace", namespace_root, "--entity", "missing"], "missing"),
        (maintain.main, ["--namespace", namespace_root, "--vacuum-hours", "1"], "168"),
    ]
    for main, argv, reason in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert reason in err[-1] and "Traceback" not in "\n".join(err), err
    assert not (tmp_path / "nowhere").exists()  # a typo creates no namespace


@pytest.mark.slow
def test_forward_job_loops_with_an_interval(admin, spark, namespace_root, capsys) -> None:
    admin.create_queue("b")
    admin.create_queue("a", forward_to="b")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("a").send_messages(ServiceBusMessage("x"))
    assert forward.main(["--namespace", namespace_root, "--loop", "--interval", "0",
                         "--runs", "2"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    summary = json.loads(line.split(" ", 1)[1])
    assert summary["runs"] == 2 and summary["forwarded"] == 0  # the last run found none
    assert admin.namespace.entity("b").counts()["active"] == 1


def _summary(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    line = capsys.readouterr().out.strip().splitlines()[-1]
    result: dict[str, object] = json.loads(line.split(" ", 1)[1])
    return result


def test_enqueue_sends_a_path_with_a_mapping_once(admin, spark, namespace_root, tmp_path,
                                                  capsys) -> None:
    admin.create_queue("orders", enable_partitioning=True)
    source = tmp_path / "orders.json"
    source.write_text("\n".join(json.dumps({"id": f"o{i}", "payload": f"p{i}", "region": "eu",
                                            "qty": i}) for i in range(5)))
    argv = ["--namespace", namespace_root, "--entity", "orders", "--path", str(source),
            "--format", "json", "--column", "body=payload", "--column", "message_id=id",
            "--properties", "region,qty"]
    assert enqueue.main(argv) == 0
    first = _summary(capsys)
    assert (first["sent"], first["already_sent"]) == (5, False)
    assert enqueue.main(argv) == 0  # the same input again: nothing sent
    again = _summary(capsys)
    assert (again["sent"], again["already_sent"], again["send_id"]) == (0, True,
                                                                          first["send_id"])
    rows = admin.namespace.entity("orders").messages().collect()
    assert sorted(r["message_id"] for r in rows) == [f"o{i}" for i in range(5)]
    assert {json.loads(str(r["application_properties"]))["region"] for r in rows} == {"eu"}
    bad = [*argv[:-2], "--column", "colour=id"]
    assert enqueue.main(bad) == 2
    assert "colour=id" in capsys.readouterr().err


@pytest.mark.slow
def test_dequeue_writes_the_sink_once_then_settles(admin, spark, namespace_root, tmp_path,
                                                   capsys) -> None:
    admin.create_queue("work", max_delivery_count=1)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("work").send_messages(
            [ServiceBusMessage(b) for b in ("a", "b", "bad")])
    sink = str(tmp_path / "sink")
    argv = ["--namespace", namespace_root, "--entity", "work", "--sink", sink,
            "--function", "dequeue_functions:upper", "--batches", "0",
            "--on-failure", "dead-letter"]
    assert dequeue.main(argv) == 0
    summary = _summary(capsys)
    assert (summary["received"], summary["completed"], summary["failed"]) == (3, 2, 1)
    rows = spark.read.format("delta").load(sink).collect()
    assert sorted(r["text"] for r in rows) == ["A", "B"]
    [dead] = [r.asDict() for r in admin.namespace.entity("work").messages().collect()]
    assert (dead["sub_queue"], dead["dead_letter_reason"]) == ("DeadLetter", "ProcessingFailed")
    # the same results again (a batch delivered twice) add nothing
    from sbqueue.jobs.dequeue import write_sink

    again = spark.createDataFrame([(rows[0]["sequence_number"], "A")],
                                  "sequence_number long, text string")
    write_sink(again, sink, "work")
    assert spark.read.format("delta").load(sink).count() == 2


def test_dequeue_with_sql(admin, spark, namespace_root, tmp_path, capsys) -> None:
    admin.create_queue("sqlq")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("sqlq").send_messages([ServiceBusMessage("x")])
    sink = str(tmp_path / "sink")
    assert dequeue.main(["--namespace", namespace_root, "--entity", "sqlq", "--sink", sink,
                         "--sql", "SELECT sequence_number, length(body) AS n FROM batch"]) == 0
    assert _summary(capsys)["completed"] == 1
    assert [r["n"] for r in spark.read.format("delta").load(sink).collect()] == [1]


@pytest.mark.slow
def test_resubmit_moves_the_selected_dead_letters_once(admin, spark, namespace_root,
                                                       capsys) -> None:
    admin.create_queue("jobs")
    admin.create_queue("retry")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("jobs").send_messages(
            [ServiceBusMessage(b, message_id=b) for b in ("x", "y", "z")])
        with client.get_queue_receiver("jobs", max_wait_time=5) as receiver:
            for message in receiver.receive_messages(3):
                receiver.dead_letter_message(
                    message, reason="late" if str(message) != "z" else "broken")
    argv = ["--namespace", namespace_root, "--entity", "jobs",
            "--where", "dead_letter_reason = 'late'"]
    assert resubmit.main(argv) == 0
    assert _summary(capsys)["resubmitted"] == 2
    rows = {r["message_id"]: r["sub_queue"]
            for r in admin.namespace.entity("jobs").messages().collect()}
    assert rows == {"x": "Main", "y": "Main", "z": "DeadLetter"}
    assert resubmit.main(argv) == 0  # nothing left that matches
    assert _summary(capsys)["resubmitted"] == 0
    assert resubmit.main(["--namespace", namespace_root, "--entity", "jobs",
                          "--to", "retry"]) == 0
    assert _summary(capsys)["resubmitted"] == 1
    assert [r["message_id"] for r in admin.namespace.entity("retry").messages().collect()] \
        == ["z"]
    assert resubmit.main([*argv[:-1], "no_such_column = 1"]) == 2
    assert "no_such_column" in capsys.readouterr().err


@pytest.mark.slow
def test_the_cli_runs_the_forward_and_maintain_jobs(admin, spark, namespace_root) -> None:
    from click.testing import CliRunner

    from sbqueue.cli import main as cli

    admin.create_queue("to")
    admin.create_queue("from", forward_to="to")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("from").send_messages(ServiceBusMessage("x"))
    runner = CliRunner()
    moved = runner.invoke(cli, ["forward", "--namespace", namespace_root])
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.output.split("sbqueue-forward ", 1)[1])["forwarded"] == 1
    kept = runner.invoke(cli, ["maintain", "--namespace", namespace_root, "--no-vacuum",
                               "--entity", "to"])
    assert kept.exit_code == 0, kept.output
    helped = runner.invoke(cli, ["forward", "--help"])
    assert helped.exit_code == 0 and "--interval" in helped.output
