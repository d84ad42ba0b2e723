"""How SQL names a Delta table by its path and a DataFrame as a MERGE's source.

Shared by the Delta operations (``store.delta``) and the guarded MERGE (``store.guarded``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import DataFrame

__all__ = ["sql_name", "with_view"]

T = TypeVar("T")


def sql_name(path: str) -> str:
    """The SQL name of the Delta table at ``path``."""
    return f"delta.`{path}`"


def with_view(df: DataFrame, run: Callable[[str], T]) -> T:
    """``run(name)`` with ``df`` registered as a temporary view of a unique ``name`` (a
    MERGE's source in SQL), dropped after."""
    name = f"_sbqueue_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(name)
    try:
        return run(name)
    finally:
        df.sparkSession.catalog.dropTempView(name)
