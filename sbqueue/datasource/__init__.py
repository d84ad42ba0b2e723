"""``format("sbqueue")``: entities as a Spark data source (issue 22, decision 024).

Built on Spark's Python Data Source API, so it works on classic Spark and over Spark
Connect alike. Its methods run in Python workers with no SparkSession: they use the
engine's driver paths over a local (or mounted) namespace folder or an S3 prefix (their
workers need the AWS environment the driver has). Spark registers it by
itself wherever sbqueue is installed, through the top-level ``pyspark_sbqueue`` module
(issue 41); ``register`` does it for one session.
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
from sbqueue.engine.reads.view_here import VIEW_SCHEMA

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
    """Make ``format("sbqueue")`` known to ``spark`` (once per session).

    Not needed where sbqueue is installed from its wheel: Spark finds the source itself
    (the ``pyspark_sbqueue`` module) at its first data source lookup. This is for the
    sessions that lookup missed: a JVM that looked before sbqueue was installed, or an
    editable install that Spark's lookup does not see. Beside Spark's own registration it
    is harmless: the session's registration is the one used."""
    if id(spark) in _registered:
        return
    spark.dataSource.register(SbqueueDataSource)
    # The reader is offered filters only with this on; a server that fixes its confs
    # refuses it, and Spark then applies every filter itself.
    with contextlib.suppress(Exception):
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    _registered.add(id(spark))
