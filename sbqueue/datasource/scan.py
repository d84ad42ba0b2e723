"""``spark.read.format("sbqueue")``: an entity's messages as its SQL view shows them.

A peek: no lock, no change, no commit (S9). One input partition per entity partition,
read in a worker on the driver's paths (``engine.reads.view_here``). Filters are applied by
Spark: taking them here (``Bounds``) is blocked by a Spark 4.2 defect (below).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition

from sbqueue.core.clock import utcnow
from sbqueue.core.subqueues import SubQueue
from sbqueue.datasource.bounds import Bounds
from sbqueue.datasource.options import Options
from sbqueue.engine.entity import Entity
from sbqueue.engine.namespace import Namespace
from sbqueue.engine.reads.view_here import VIEW_SCHEMA, view_rows_here
from sbqueue.exceptions import InvalidOperationError

__all__ = ["BatchScan"]

_NAMES = VIEW_SCHEMA.fieldNames()


class _Partition(InputPartition):
    """One entity partition."""


def open_entity(options: Options) -> Entity:
    """The entity the options name, in its namespace opened without Spark."""
    namespace = Namespace.without_spark(options.namespace, options.where())
    return namespace.entity(options.entity)


class BatchScan(DataSourceReader):
    """A read of one entity (or one of its sub-queues)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = Options.parse(options)
        self.bounds = Bounds()

    # No ``pushFilters``: in Spark 4.2 a Python source's read plan made with pushed filters
    # is kept on the relation, and the next query on the same DataFrame without filters
    # reuses it without asking the source (measured: a count after a count of
    # ``partition_id = 0`` returned that partition's 126 rows, not 1,980). Every query
    # reads every partition until that is fixed; ``Bounds`` is ready (decision 024).

    def partitions(self) -> Sequence[InputPartition]:
        entity = open_entity(self.options)
        if entity.dedupe is not None:
            raise InvalidOperationError(
                f"{self.options.where()} detects duplicates: which of its rows are messages "
                "is decided by Spark: read Namespace(...).entity(...).messages() or its SQL "
                "view instead (decision 024)")
        return [_Partition(p) for p in self.bounds.partitions(entity.partitions)]

    def read(self, partition: InputPartition) -> Iterator[tuple[object, ...]]:
        if partition.value is None:  # Spark's stand-in when the filters left no partition
            return
        entity = open_entity(self.options)
        rows = view_rows_here(entity.inbox, entity.ledger, [int(partition.value)],
                              entity.target, utcnow())
        if rows is None:
            raise InvalidOperationError(
                f"{self.options.where()}: partition {partition.value} holds more than the "
                "driver reads (or forwarding windows); read its view with spark.table "
                "instead (decision 024)")
        keep = self.bounds.row_test()
        shown = None if entity.sub_queue is SubQueue.MAIN else entity.sub_queue.view_name
        for row in rows:
            if keep(row) and (shown is None or row["sub_queue"] == shown):
                yield tuple(row[n] for n in _NAMES)
