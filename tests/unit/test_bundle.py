"""databricks.yml against the package (issue 9): every task runs a real entry point of the
wheel, a real file or notebook; every variable it uses is defined; dev pauses schedules."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import tomllib
import yaml

REPO = Path(__file__).resolve().parents[2]
BUNDLE: dict[str, Any] = yaml.safe_load((REPO / "databricks.yml").read_text())
SCRIPTS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())[
    "project"]["scripts"]


def _tasks() -> list[dict[str, Any]]:
    return [task for job in BUNDLE["resources"]["jobs"].values() for task in job["tasks"]]


def test_every_task_points_at_a_real_entry_point_or_file() -> None:
    kinds = set()
    for task in _tasks():
        if "python_wheel_task" in task:
            wheel = task["python_wheel_task"]
            assert wheel["package_name"] == "sbqueue"
            target = SCRIPTS[wheel["entry_point"]]  # declared in pyproject.toml
            module, _, name = target.partition(":")
            assert callable(getattr(importlib.import_module(module), name)), target
            kinds.add("wheel")
        elif "spark_python_task" in task:
            assert (REPO / task["spark_python_task"]["python_file"]).is_file()
        elif "notebook_task" in task:
            path = REPO / task["notebook_task"]["notebook_path"]
            assert path.with_suffix(".py").is_file() or path.is_file(), path
        else:
            raise AssertionError(f"unknown task kind in {task}")
    assert "wheel" in kinds


def test_every_variable_used_is_defined_and_jobs_are_scheduled() -> None:
    text = (REPO / "databricks.yml").read_text()
    used = set(re.findall(r"\$\{var\.([A-Za-z_][A-Za-z0-9_]*)\}", text))
    assert used and used <= set(BUNDLE["variables"]), used - set(BUNDLE["variables"])
    jobs = BUNDLE["resources"]["jobs"]
    assert {"sbqueue_forward", "sbqueue_maintain"} <= {k for k, j in jobs.items()
                                                       if "schedule" in j}
    assert any(t.get("python_wheel_task", {}).get("entry_point") == "sbqueue-dequeue"
               for t in _tasks())
    assert all(j["job_clusters"] for j in jobs.values())  # job clusters, not all-purpose


def test_targets_dev_paused_and_prod() -> None:
    targets = BUNDLE["targets"]
    assert targets["dev"]["mode"] == "development" and targets["dev"]["default"] is True
    assert targets["dev"]["presets"]["trigger_pause_status"] == "PAUSED"
    assert targets["prod"]["mode"] == "production"
    assert BUNDLE["artifacts"]["sbqueue_wheel"]["type"] == "whl"
    for task in _tasks():
        assert {"whl": "./dist/*.whl"} in task["libraries"]
