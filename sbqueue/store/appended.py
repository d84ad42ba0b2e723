"""Rows appended to a table after a version, read on the driver: a head read's first rows
in commit order, or every appended row as Arrow (a forwarding window's decision).

Why its own module: both read the same commits two ways. Walking the commits in order
(``store.warm``: each commit's added files from its commit file, decoded once per process)
stops at the commit that fills the head, so a head read costs the head, not the change
feed of every commit since; anything but plain appends (a change-data file, a
data-changing remove) or another order reads delta-rs's change feed, which prunes files
and row groups by a filter. None wherever the driver cannot read it: the caller reads
with Spark.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sbqueue.store import snapshot, warm
from sbqueue.store.driver import (
    Keep,
    Row,
    enabled,
    latest,
    native_files,
    or_none,
    plain_rows,
)
from sbqueue.store.logfiles import has_commit, log_files
from sbqueue.store.thresholds import ROW_LIMIT

__all__ = ["appended", "appended_table"]


def appended(path: str, after_version: int, up_to_version: int, columns: Sequence[str],
             keep: Keep, order: Sequence[str], limit: int, where: str | None = None,
             take: warm.FileKeep | None = None) -> list[Row] | None:
    """The first ``limit`` rows by ``order`` among the rows appended in versions
    (after_version, up_to_version] that ``keep`` accepts (from the change feed, each with
    ``_commit_version``); None when it cannot be read here. ``where``: a SQL filter by
    which delta-rs skips files and row groups of the change feed; ``keep`` must hold it
    too (the walk of ``_walked`` reads by ``keep`` alone). ``take``: the files the walk
    decodes, by their partition values and version (``keep`` must refuse the rows of the
    others)."""
    if not enabled(path):
        return None
    if up_to_version <= after_version:
        return []
    if not _feed_holds(path, after_version):
        return None  # the log no longer holds those commits: Spark reads by row tracking

    try:
        walked = or_none(lambda: _walked(path, (after_version, up_to_version),
                                         list(dict.fromkeys([*columns, *order])), keep,
                                         order, limit, take))
    except warm.TooMany:  # a commit too big to decode whole: the change feed, pruned by
        walked = None     # ``where`` (files and row groups), reads only its head
    if walked is not None:
        return walked
    wanted = list(dict.fromkeys([*columns, *order, "_change_type", "_commit_version"]))
    return or_none(lambda: _first(
        _changes(path, after_version, up_to_version, wanted, where), wanted, keep, order, limit))


_IN_COMMIT_ORDER = ("_commit_version", "batch_index")


def _walked(path: str, versions: tuple[int, int], wanted: list[str], keep: Keep,
            order: Sequence[str], limit: int, take: warm.FileKeep | None
            ) -> list[Row] | None:
    """``appended`` by walking the commits in order, each one's rows from memory where it
    was read before (``store.warm``), stopping at the commit that completes ``limit``
    rows: a head read costs the head, not the change feed of every commit since. None
    where a commit is not plain appends or the order is not commit order (the change
    feed is read instead)."""
    if tuple(order) != _IN_COMMIT_ORDER:
        return None
    schema = _readable_schema(path, versions[1])
    if schema is None:
        return None
    files, found, seen = native_files(path), list[Row](), 0
    for version in range(versions[0] + 1, versions[1] + 1):
        rows = warm.added(path, schema, files, version, take, ROW_LIMIT - seen)
        if rows is None:
            return None
        if not rows.num_rows:
            continue
        seen += rows.num_rows
        kept = [r for r in plain_rows(rows.select(wanted).to_pylist()) if keep(r)]
        found += sorted(kept, key=lambda r: r["batch_index"])
        if len(found) >= limit:
            break
    return found[:limit]


def _readable_schema(path: str, up_to_version: int) -> pa.Schema | None:
    """The table's schema where ``store.warm`` reads its files (else None): from this
    process's snapshot (as held, without a look, where it holds ``up_to_version``: a
    change of schema up to it would have made the snapshot load the table again), or
    delta-rs's table where the snapshot does not follow it."""
    snap = snapshot.held(path, up_to_version) or snapshot.current(path)
    if snap is not None:
        return snap.schema if warm.BUDGET > 0 else None
    table = latest(path)
    return pa.schema(table.schema().to_arrow()) if warm.readable(table) else None


def _feed_holds(path: str, after_version: int) -> bool:
    """Whether the log still holds the commit after ``after_version`` (its change feed)."""
    return has_commit(log_files(path), after_version + 1)


def _changes(path: str, after_version: int, up_to_version: int, wanted: list[str],
             where: str | None = None) -> pa.RecordBatchReader:
    """The change feed of versions (after_version, up_to_version], ``wanted`` columns."""
    return pa.RecordBatchReader.from_stream(latest(path).load_cdf(
        starting_version=after_version + 1, ending_version=up_to_version, columns=wanted,
        predicate=where))


def appended_table(path: str, after_version: int, up_to_version: int, columns: Sequence[str],
                   cap: int, where: str | None = None) -> pa.Table | None:
    """The rows appended in versions (after_version, up_to_version] as one Arrow table with
    ``_commit_version``, for a decision made with Arrow compute over many rows (a
    forwarding window); None when it cannot be read here or holds more than ``cap`` rows.
    ``where``: a SQL filter on data columns that files and row groups are pruned by (the
    caller filters exactly afterwards)."""
    if not enabled(path) or up_to_version <= after_version or not _feed_holds(
            path, after_version):
        return None
    wanted = list(dict.fromkeys([*columns, "_change_type", "_commit_version"]))

    def read() -> pa.Table | None:
        stream = _changes(path, after_version, up_to_version, wanted, where)
        schema = pa.schema([stream.schema.field(c) for c in wanted])
        batches, seen = [], 0
        for batch in stream:
            seen += batch.num_rows
            if seen > cap:
                return None
            batches.append(batch.select(wanted))
        table = pa.Table.from_batches(batches, schema)
        for k, field in enumerate(schema):  # only the view types: a cast of a struct
            if _unviewed(field.type) != field.type:  # with null rows is refused
                table = table.set_column(k, field.with_type(_unviewed(field.type)),
                                         pc.cast(table.column(k), _unviewed(field.type)))
        inserts = table.filter(pc.equal(table.column("_change_type"), "insert"))
        return inserts.drop_columns(["_change_type"]).combine_chunks()
    return or_none(read)


def _unviewed(kind: pa.DataType) -> pa.DataType:
    """The plain type of a view type delta-rs reads (most compute kernels take only those)."""
    if kind == pa.string_view():
        return pa.string()
    if kind == pa.binary_view():
        return pa.binary()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind):
        return pa.list_(_unviewed(kind.value_type))
    return kind


def _first(stream: pa.RecordBatchReader, wanted: list[str], keep: Keep,
           order: Sequence[str], limit: int) -> list[Row] | None:
    """A bounded top-``limit`` over a stream of change rows (inserts only)."""
    best: list[tuple[tuple[Any, ...], int, Row]] = []
    seen, arrival = 0, itertools.count()
    for batch in stream:
        seen += batch.num_rows
        if seen > ROW_LIMIT:
            return None
        for row in plain_rows(batch.select(wanted).to_pylist()):
            if row.pop("_change_type") != "insert" or not keep(row):
                continue
            item = (tuple(-row[c] for c in order), next(arrival), row)  # a max-heap by order
            if len(best) < limit:
                heapq.heappush(best, item)
            elif item[0] > best[0][0]:
                heapq.heapreplace(best, item)
    return [row for _, _, row in sorted(best, key=lambda i: tuple(-v for v in i[0]))]
