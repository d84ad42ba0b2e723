"""``format("sbqueue")``: entities as a Spark data source (issue 22, decision 024).

Built on Spark's Python Data Source API, so it works on classic Spark and over Spark
Connect alike. Its methods run in Python workers with no SparkSession: they use the
engine's driver paths over a local (or mounted) namespace folder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceStreamWriter
from pyspark.sql.types import StructType

from sbqueue.datasource.sink import StreamSink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SbqueueDataSource", "register"]


class SbqueueDataSource(DataSource):
    """``spark.read`` / ``writeStream`` ``.format("sbqueue")`` with options ``namespace``
    and ``entity``."""

    @classmethod
    def name(cls) -> str:
        return "sbqueue"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamSink(self.options, schema)


_registered: set[int] = set()


def register(spark: SparkSession) -> None:
    """Make ``format("sbqueue")`` known to ``spark`` (once per session)."""
    if id(spark) in _registered:
        return
    spark.dataSource.register(SbqueueDataSource)
    _registered.add(id(spark))
