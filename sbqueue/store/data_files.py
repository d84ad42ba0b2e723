"""Data files of the commits sbqueue writes on the driver: one Parquet file per partition
value, with the statistics Delta readers skip files by.

Why its own module: the row-tracked appends (``store.tracked``) and the rewrites and plain
appends (``store.rewrite``) write files the same way, and a statistic that is not exact
would make Spark skip a file that holds a row; so only exact ones are written (integers,
strings no longer than Delta's prefix), never timestamps (Delta keeps milliseconds).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sbqueue.store.memo import made_once
from sbqueue.store.objects import Files
from sbqueue.store.thresholds import PLAIN_FILE_BYTES

__all__ = ["check_nulls", "split", "write_file"]

_PREFIX = 32  # Delta's string statistics prefix: longer values are not written exactly
_PYTHON_ROWS = 256  # rows up to which statistics are computed in Python


def check_nulls(table: pa.Table) -> None:
    """``ValueError`` naming the first NOT NULL column (or field of one) that holds a null
    where its parent is set: raised before any file is written. pyarrow builds such
    tables without a word (apache/arrow#43145), and a partition column never reaches
    its Parquet writer, which would check the others."""
    for field, column in zip(table.schema, table.columns, strict=True):
        if not _may_hold(field) or (field.nullable and column.null_count == len(column)):
            continue  # nothing in it can be refused: nullable and flat, or no value at all
        for chunk in column.chunks:
            found = _null_in(chunk, field, field.name)
            if found is not None:
                raise ValueError(f"column {found} is NOT NULL, but a row holds null; "
                                 "nothing was written")


def _may_hold(field: pa.Field) -> bool:
    """Whether a null could break a NOT NULL rule in ``field``: it is NOT NULL or nested
    (most of a send's columns are nullable and flat: skipped, ~20 Arrow calls each)."""
    kind = field.type
    return not field.nullable or pa.types.is_struct(kind) or pa.types.is_list(kind)


def _null_in(array: pa.Array, field: pa.Field, name: str) -> str | None:
    if not field.nullable and array.null_count:
        return name
    if pa.types.is_struct(field.type):
        present = array.filter(pc.is_valid(array)) if array.null_count else array
        for index, child in enumerate(field.type):
            found = _null_in(present.field(index), child, f"{name}.{child.name}")
            if found is not None:
                return found
    elif pa.types.is_list(field.type):
        return _null_in(array.flatten(), field.type.value_field, f"{name}.element")
    return None


def split(table: pa.Table, partition_by: Sequence[str]) -> list[pa.Table]:
    """The rows of each partition value, in their order."""
    keys = list(zip(*[table.column(c).to_pylist() for c in partition_by], strict=True))
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    if len(groups) == 1:  # one partition (a complete's record, most receives): as it is
        return [table]
    return [table.take(pa.array(rows, pa.int64())) for rows in groups.values()]


def write_file(root: Files, part: pa.Table, partition_by: Sequence[str],
                stats_columns: Sequence[str]) -> dict[str, Any]:
    """Write one partition's rows (``part``, partition columns included) as one Parquet
    file in its partition's folder; its ``add`` action, with ``rows`` besides."""
    values = {c: part.column(c)[0].as_py() for c in partition_by}
    folder = "/".join(f"{c}={values[c]}" for c in partition_by)
    name = f"{folder}/part-00000-{uuid.uuid4()}.c000.parquet"
    data = part.drop_columns(list(partition_by))
    # An Arrow buffer, not a Python file object (each page write a call back into Python),
    # and the buffers' total size, not ``nbytes`` (which walks them for shared ones).
    sink = pa.BufferOutputStream()
    if data.get_total_buffer_size() <= PLAIN_FILE_BYTES:  # a few rows: codecs cost more
        pq.write_table(data, sink, compression="none", use_dictionary=False,
                       write_statistics=False, store_schema=False)
    else:
        pq.write_table(data, sink, compression="zstd")
    body = sink.getvalue().to_pybytes()
    root.put(name, body)
    return {
        "path": name,
        "partitionValues": {c: str(values[c]) for c in partition_by},
        "size": len(body),
        "modificationTime": int(time.time() * 1000),
        "dataChange": True,
        "stats": json.dumps(_stats(data, stats_columns), separators=(",", ":")),
        "rows": part.num_rows,
    }


def _stats(data: pa.Table, columns: Sequence[str]) -> dict[str, Any]:
    """``numRecords``, and exact min / max / null counts of the statistics columns whose
    JSON form is exact (integers, short strings). A small file's values are compared in
    Python (one conversion: ~20 Arrow calls a column cost more for a few rows), a large
    one's with Arrow's kernels."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    chosen = _chosen(data.schema, tuple(columns))
    if data.num_rows <= _PYTHON_ROWS:
        values = data.select(chosen).to_pydict()
        for name in chosen:
            present = [v for v in values[name] if v is not None]
            if isinstance(next(iter(present), 0), str) and any(len(v) > _PREFIX
                                                                for v in present):
                continue
            nulls[name] = len(values[name]) - len(present)
            if present:
                low[name], high[name] = min(present), max(present)
    else:
        for name in chosen:
            column = data.column(name)
            if pa.types.is_string(column.type) and (
                    pc.max(pc.utf8_length(column)).as_py() or 0) > _PREFIX:
                continue
            nulls[name] = column.null_count
            if column.null_count < len(column):
                bounds = pc.min_max(column)
                low[name], high[name] = bounds["min"].as_py(), bounds["max"].as_py()
    return {"numRecords": data.num_rows, "minValues": low, "maxValues": high,
            "nullCount": nulls}


def _chosen(schema: pa.Schema, columns: tuple[str, ...]) -> list[str]:
    """The statistics columns of ``schema`` whose JSON form is exact; made once per set of
    column names (every commit of a table asked again: ~0.1 ms of field lookups; the types
    are checked again only where the names differ, as a table's columns keep their types)."""
    return made_once(_CHOSEN, (columns, tuple(schema.names)), lambda: [
        n for n in columns if schema.get_field_index(n) >= 0 and _exact_kind(schema, n)], 256)


_CHOSEN: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}


def _exact_kind(schema: pa.Schema, name: str) -> bool:
    kind = schema.field(name).type
    return bool(pa.types.is_integer(kind) or pa.types.is_string(kind))
