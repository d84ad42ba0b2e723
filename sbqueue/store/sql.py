"""How SQL names a Delta table by its path and a DataFrame as a MERGE's source.

Shared by the Delta operations (``store.delta``) and the guarded MERGE (``store.guarded``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import DataFrame

from sbqueue.exceptions import StorageFailureError
from sbqueue.store.location import is_s3

__all__ = ["spark_writes", "sql_name", "with_view"]

T = TypeVar("T")


def sql_name(path: str) -> str:
    """The SQL name of the Delta table at ``path``."""
    return f"delta.`{path}`"


def spark_writes(path: str) -> str:
    """``path``, where Spark may commit to it; on S3 a ``StorageFailureError``: Delta 4.4
    has no S3 log store that claims versions the way the driver's commits and delta-rs do
    (conditional writes), so a Spark commit beside them could overwrite one (decision
    040). Every Spark write of the store asks this first; nothing is written."""
    if is_s3(path):
        raise StorageFailureError(
            f"{path}: Spark does not commit to S3 namespaces (no commit protocol it shares "
            "with the driver's commits there): DataFrame and SQL writes on S3 need Spark's "
            "S3A connector and that protocol (README, 'Object storage'); nothing was "
            "written")
    return path


def with_view(df: DataFrame, run: Callable[[str], T]) -> T:
    """``run(name)`` with ``df`` registered as a temporary view of a unique ``name`` (a
    MERGE's source in SQL), dropped after."""
    name = f"_sbqueue_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(name)
    try:
        return run(name)
    finally:
        df.sparkSession.catalog.dropTempView(name)
