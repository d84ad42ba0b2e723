"""A stand-in for the SparkSession in a process that has none.

Why: a Python data source's methods (``sbqueue.datasource``) run in Python workers that
Spark starts, with no SparkSession and no way to reach one. On a local folder the engine's
driver paths (delta-rs reads, ``store.tracked`` appends and rewrites; decisions 012, 015)
do a stream's work without Spark, so the namespace is opened with this stand-in. Anything
that would still need Spark (a read past the driver's row limit, a MERGE fallback) raises
one clear error naming what asked, instead of an ``AttributeError`` from ``None``.
"""

from __future__ import annotations

from typing import Any, NoReturn

from sbqueue.exceptions import SparkSetupError

__all__ = ["NoSpark"]


class NoSpark:
    """Raises ``SparkSetupError`` on any use, naming ``where`` it was opened."""

    def __init__(self, where: str) -> None:
        self._where = where

    def __getattr__(self, name: str) -> NoReturn:
        raise SparkSetupError(
            f"{self._where}: this step needs Spark ({name}), which a Python data source's "
            "worker does not have; send or receive these messages with the DataFrame API "
            "(send_dataframe, receive_dataframe) in foreachBatch instead (decision 024)")

    def __repr__(self) -> str:
        return f"NoSpark({self._where!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoSpark, (self._where,))
