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
from sbqueue.jobs import forward, maintain

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]


def spark_submit(job: str, *args: str, cwd: Path) -> dict[str, object]:
    """Run ``jobs/<job>.py`` with spark-submit (local[1]); its JSON summary."""
    from sbqueue.spark import submit_properties
    from sbqueue.spark.logstore import _pyspark_home

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [str(_pyspark_home() / "bin" / "spark-submit"), "--master", "local[1]",
         "--properties-file", str(submit_properties()), str(REPO / "jobs" / f"{job}.py"),
         *args], capture_output=True, text=True, timeout=900, env=env, cwd=cwd)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    [line] = [x for x in result.stdout.splitlines() if x.startswith(f"sbqueue-{job} ")]
    summary: dict[str, object] = json.loads(line.split(" ", 1)[1])
    return summary


@pytest.mark.slow
def test_forward_and_maintain_jobs_under_spark_submit(admin, spark, namespace_root,
                                                      tmp_path) -> None:
    admin.create_queue("out")
    admin.create_queue("in", enable_partitioning=True, forward_to="out")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("in").send_messages([ServiceBusMessage(f"m{i}")
                                                     for i in range(12)])
    moved = spark_submit("forward", "--namespace", namespace_root, cwd=tmp_path)
    assert (moved["forwarded"], moved["runs"]) == (12, 1)
    assert admin.namespace.entity("out").counts()["active"] == 12
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
