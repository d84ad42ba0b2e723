"""``format("sbqueue")``: entities as a Spark data source (issue 22, decision 024).

Built on Spark's Python Data Source API, so it works on classic Spark and over Spark
Connect alike. Its methods run in Python workers with no SparkSession: they use the
engine's driver paths over a local (or mounted) namespace folder.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
)
from pyspark.sql.types import StructType

from sbqueue.datasource.scan import BatchScan
from sbqueue.datasource.sink import StreamSink
from sbqueue.datasource.stream import StreamSource
from sbqueue.engine.view_here import VIEW_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SbqueueDataSource", "register"]


class SbqueueDataSource(DataSource):
    """``spark.read`` / ``writeStream`` ``.format("sbqueue")`` with options ``namespace``
    and ``entity``."""

    @classmethod
    def name(cls) -> str:
        return "sbqueue"

    def schema(self) -> StructType:
        return VIEW_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchScan(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamSource(self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamSink(self.options, schema)


_registered: set[int] = set()


def register(spark: SparkSession) -> None:
    """Make ``format("sbqueue")`` known to ``spark`` (once per session)."""
    if id(spark) in _registered:
        return
    spark.dataSource.register(SbqueueDataSource)
    # The reader is offered filters only with this on; a server that fixes its confs
    # refuses it, and Spark then applies every filter itself.
    with contextlib.suppress(Exception):
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    _registered.add(id(spark))
