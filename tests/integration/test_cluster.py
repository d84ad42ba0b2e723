"""Issue 5 point 7: the same code on a real cluster. A Spark standalone master and one
worker from the pyspark package, on 127.0.0.1; a spark-submit job sends, receives and
completes 10,000 messages on a local namespace folder, with tasks run by the executor.
Issue 44 point 5: the same cluster on an S3 namespace (the moto server): the executor
writes the messages to S3 through S3A, with the properties ``sbqueue spark-conf --store
s3`` writes and the AWS environment the worker passes on to it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ports import free_port, listening

REPO = Path(__file__).resolve().parents[2]
# spark-submit resolves the Delta jars with Ivy in the shared cache: one worker at a time
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-submit")]


def _wait_for(port: int, seconds: float) -> None:
    if not listening(port, seconds, pause=0.5):
        raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {seconds}s")


@pytest.mark.parametrize("store", ["local", "s3"])
def test_roundtrip_on_a_standalone_cluster(tmp_path, store: str,
                                           request: pytest.FixtureRequest) -> None:
    from sbqueue.spark import submit_properties
    from sbqueue.spark.logstore import _pyspark_home

    if store == "s3":  # the AWS environment (the fixture's) reaches the worker's executors
        root, messages = str(request.getfixturevalue("s3_root")), 2_000
        sbqueue = Path(sys.executable).parent / "sbqueue"
        properties = subprocess.run([str(sbqueue), "spark-conf", "--store", "s3"],
                                    capture_output=True, text=True, check=True).stdout.strip()
    else:
        root, messages, properties = str(tmp_path / "ns"), 10_000, str(submit_properties())
    bin_dir = _pyspark_home() / "bin"
    port = free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_WORKER_DIR": str(tmp_path / "work"), "SPARK_LOG_DIR": str(tmp_path)}
    master_url = f"spark://127.0.0.1:{port}"
    daemons = [subprocess.Popen(
        [str(bin_dir / "spark-class"), "org.apache.spark.deploy.master.Master",
         "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        _wait_for(port, 60)
        daemons.append(subprocess.Popen(
            [str(bin_dir / "spark-class"), "org.apache.spark.deploy.worker.Worker", master_url,
             "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
             "--webui-port", str(free_port()), "--work-dir", str(tmp_path / "work")],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        result = subprocess.run(
            [str(bin_dir / "spark-submit"), "--master", master_url,
             "--properties-file", properties,
             "--conf", "spark.executor.memory=1g", "--conf", "spark.cores.max=2",
             str(REPO / "jobs" / "roundtrip.py"), root, str(messages), str(messages // 2)],
            capture_output=True, text=True, timeout=1200, env=env, cwd=tmp_path)
    finally:
        for daemon in reversed(daemons):
            daemon.terminate()
        for daemon in daemons:
            daemon.wait(timeout=60)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("roundtrip "))
    summary = json.loads(line.split(" ", 1)[1])
    assert summary["master"] == master_url
    assert summary["sent"] == summary["received"] == summary["completed"] == messages
    assert summary["remaining"] == 0
    assert summary["driver_pid"] not in summary["task_pids"]  # tasks ran in the executor
