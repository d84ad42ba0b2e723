"""Shared by the benchmarks: Spark job counting, timing, and medians of interleaved runs."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
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


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
