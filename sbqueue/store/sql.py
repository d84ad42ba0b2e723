"""How SQL names a Delta table by its path and a DataFrame as a MERGE's source.

Shared by the Delta operations (``store.delta``) and the guarded MERGE (``store.guarded``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession

from sbqueue.exceptions import StorageFailureError
from sbqueue.location import is_s3
from sbqueue.spark.s3a import has_s3a

__all__ = ["spark_writes", "sql_name", "with_view"]

T = TypeVar("T")


def sql_name(path: str) -> str:
    """The SQL name of the Delta table at ``path``."""
    return f"delta.`{path}`"


def spark_writes(spark: SparkSession, path: str) -> str:
    """``path``, where ``spark`` may commit to it. On S3 that needs the session's
    put-if-absent log store (``spark.s3a``, decision 042): Delta's own S3 store checks,
    then writes, so a Spark commit beside the driver's and delta-rs's could overwrite one
    (decision 040); without it a ``StorageFailureError``, and nothing is written. Every
    Spark write of the store asks this first."""
    if is_s3(path) and not _writes_s3(spark):
        raise StorageFailureError(
            f"{path}: this Spark session does not commit to S3 the way the driver's "
            "commits and delta-rs do (put-if-absent): open the namespace without a session "
            "so sbqueue starts one with S3A, or start yours with the confs of "
            "'sbqueue spark-conf --store s3' (README, 'Object storage'); nothing was "
            "written")
    return path


_checked: dict[int, tuple[object, bool]] = {}  # id(session) -> (session, has the store)


def _writes_s3(spark: SparkSession) -> bool:
    """``has_s3a`` once per session (a conf read is a round trip)."""
    seen = _checked.get(id(spark))
    if seen is None or seen[0] is not spark:
        seen = (spark, has_s3a(spark))
        _checked[id(spark)] = seen
    return seen[1]


def with_view(df: DataFrame, run: Callable[[str], T]) -> T:
    """``run(name)`` with ``df`` registered as a temporary view of a unique ``name`` (a
    MERGE's source in SQL), dropped after."""
    name = f"_sbqueue_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(name)
    try:
        return run(name)
    finally:
        df.sparkSession.catalog.dropTempView(name)
