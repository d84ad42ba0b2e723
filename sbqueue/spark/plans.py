"""What a DataFrame's executed plan did, read from the JVM (Spark has no public Python
API for a plan's metrics): how many rows its file scans put out, for tests and benchmarks
that hold a read to the rows it needs."""

from __future__ import annotations

from pyspark.sql import DataFrame

__all__ = ["executed_plan", "scanned_rows"]


def executed_plan(frame: DataFrame) -> str:
    """The physical plan ``frame`` ran (or will run) with, as Spark prints it."""
    return str(frame._jdf.queryExecution().executedPlan().toString())


def scanned_rows(frame: DataFrame) -> int:
    """The rows the file scans of ``frame``'s plan put out when it ran: whole row groups
    (a pushed filter skips row groups; rows within one are filtered after the scan)."""
    leaves = frame._jdf.queryExecution().executedPlan().collectLeaves()
    total = 0
    for k in range(leaves.size()):
        leaf = leaves.apply(k)
        if leaf.nodeName().startswith("Scan ") and leaf.metrics().contains("numOutputRows"):
            total += int(leaf.metrics().apply("numOutputRows").value())
    return total
