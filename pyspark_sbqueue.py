"""``format("sbqueue")`` in every session where sbqueue is installed, with no ``register``.

Spark 4 registers Python data sources by itself: at the first lookup of a data source name
that no JVM source claims (once per JVM), it starts a Python worker that walks the
top-level modules of its path (``pkgutil.iter_modules``), imports each one whose name
starts with ``pyspark_`` and registers its ``DefaultSource`` (a ``DataSource`` subclass)
under ``DefaultSource.name()`` (``pyspark/sql/worker/lookup_data_sources.py``). The wheel
installs this module beside ``sbqueue`` in site-packages, so that worker finds it.

Every ``pyspark_`` module on the path is imported at that lookup, in every JVM of the
machine, whether or not it reads sbqueue: this one imports only PySpark's data source base
(which the lookup has already imported) and loads ``sbqueue`` when Spark first asks the
source for something. It never starts Spark. The source is
``sbqueue.datasource.SbqueueDataSource``; ``sbqueue.datasource.register(spark)`` registers
that class under the same name, for a session whose JVM looked before sbqueue was
installed (Spark then uses the session's registration and logs that it replaced this one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

if TYPE_CHECKING:
    from pyspark.sql.datasource import (
        DataSourceReader,
        DataSourceStreamReader,
        DataSourceStreamWriter,
    )
    from pyspark.sql.types import StructType

__all__ = ["DefaultSource"]


class DefaultSource(DataSource):
    """``format("sbqueue")`` as Spark finds it: each method hands over to sbqueue's
    ``SbqueueDataSource`` with the same options, imported on first use."""

    @classmethod
    def name(cls) -> str:
        return "sbqueue"

    def _source(self) -> DataSource:
        from sbqueue.datasource import SbqueueDataSource

        return SbqueueDataSource(self.options)

    def schema(self) -> StructType | str:
        return self._source().schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return self._source().reader(schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return self._source().streamReader(schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return self._source().streamWriter(schema, overwrite)
