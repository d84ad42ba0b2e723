"""Shared by the benchmarks: Spark job counting, timing, and medians of interleaved runs."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def measured(spark: Any, fn: Callable[[], T]) -> tuple[T, float, int]:
    """(result, seconds, Spark jobs) of ``fn``; jobs are counted through a job group of this
    thread (Spark's status tracker), so only the jobs ``fn`` ran are counted."""
    sc = spark.sparkContext
    group = f"bench-{uuid.uuid4().hex}"
    sc.setJobGroup(group, group)
    start = time.perf_counter()
    try:
        result = fn()
    finally:
        seconds = time.perf_counter() - start
        jobs = len(sc.statusTracker().getJobIdsForGroup(group))
        sc.setJobGroup("", "")
    return result, seconds, jobs


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the machine so far (Linux /proc/stat), to show whether a
    run was bound by the machine's cores."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def record(name: str, result: Mapping[str, Any]) -> None:
    """Print a run's result as one JSON line and append it to
    ``benchmarks/results/<name>-<date>.jsonl``."""
    from datetime import date
    from pathlib import Path

    note = os.environ.get("SBQUEUE_BENCH_NOTE")  # what ran: the code, what ran beside it
    line = json.dumps({**result, "note": note} if note else result)
    print(line)
    out = Path(__file__).parent / "results" / f"{name}-{date.today()}.jsonl"
    with out.open("a") as f:
        f.write(line + "\n")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class Timings:
    """Seconds and Spark jobs of named operations, measured round by round (interleaved),
    reported as medians: the record every side-by-side benchmark keeps."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.times: dict[str, list[float]] = {}
        self.jobs: dict[str, int] = {}

    def timed(self, name: str, fn: Callable[[], Any]) -> None:
        _, seconds, n = measured(self.spark, fn)
        self.times.setdefault(name, []).append(seconds)
        self.jobs[name] = n

    def medians(self) -> dict[str, float]:
        return {k: round(median(v), 3) for k, v in self.times.items()}


def run_parts(app_name: str, parts: str,
              runners: Mapping[str, Callable[[Any, str], dict[str, Any]]],
              root: str | None = None) -> None:
    """Run the named parts in order, each in a folder of one root (a temporary local one
    unless ``root`` names another, an S3 prefix), and print one JSON object per part with
    its wall time."""
    from sbqueue.spark import get_session
    from sbqueue.spark.session import store_conf

    unknown = [p for p in parts.split(",") if p not in runners]
    if unknown:
        raise SystemExit(f"unknown part(s) {', '.join(unknown)}; known: {', '.join(runners)}")
    spark = get_session(app_name, extra_conf=store_conf(root))  # S3A for an S3 root
    local = root is None
    root = root or tempfile.mkdtemp(prefix="sbq-bench-")
    try:
        for part in parts.split(","):
            started = time.perf_counter()
            report = runners[part](spark, f"{root}/{part}")
            report["wall_s"] = round(time.perf_counter() - started, 1)
            print(json.dumps(report), flush=True)
    finally:
        if local:
            shutil.rmtree(root, ignore_errors=True)
