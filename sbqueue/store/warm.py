"""A table's data files kept decoded in this process (issue 45 point 1, decision 044).

Why: a Delta data file never changes once written (a commit adds and removes whole files),
so a file read once serves every later read of its partition until a commit removes it
from the snapshot. A receive reads its ledger partitions twice (to decide, then to rewrite
them) and the processes that serve an entity read the same few small files again and
again: through delta-rs's ``to_pyarrow_dataset`` each read built the fragments of every
file again (~47 ms for 17 files, measured) and decoded each file (~20 ms), where the
snapshot's add actions say which files to take in under a millisecond. The snapshot itself
stays warm in ``store.driver`` (delta-rs's incremental update reads only the new commits).

Bounded by bytes (least recently used first out), so a process's memory does not grow with
what a queue holds. Only tables whose files hold their rows as written are served here
(``readable``: no deletion vectors, no column mapping); the caller reads others through
delta-rs.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from sbqueue.store.logfiles import commit_actions, log_files

__all__ = ["BUDGET", "FileKeep", "TooMany", "added", "partition_table", "readable"]

# Bytes of decoded files a process keeps at most (``SBQUEUE_WARM_BYTES``): a ledger file is
# a few KB to a few MB; the inbox's hold bodies, which is why there is a bound at all.
# 0 turns it off (every read through delta-rs's dataset, as before decision 044).
BUDGET = int(os.environ.get("SBQUEUE_WARM_BYTES", str(256 << 20)))

# Whether a data file may hold a row a read wants, by its partition values and the version
# that added it: decided before the file is decoded.
FileKeep = Callable[[Mapping[str, Any], int], bool]

_lock = threading.Lock()
_files: OrderedDict[tuple[str, str, str], pa.Table] = OrderedDict()
_held = [0]  # bytes in _files
# Reader features that leave a data file's rows as its Parquet rows: a VARIANT is a struct of
# two binaries in the file, as delta-rs's own dataset reads it.
_PLAIN_READS = frozenset({"variantType", "variantType-preview", "timestampNtz"})
_FORMAT = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True))


def partition_table(root: str, table: Any, files: Any,
                    partitions: Mapping[str, Sequence[Any]], cap: int) -> pa.Table | None:
    """Every row of the files of ``table``'s snapshot in the named partitions (partition
    column -> values), as one Arrow table with the table's schema (``TooMany`` before
    anything is decoded where they hold more than ``cap`` rows); None where this module
    does not read the table (a reader feature, a partition filter on a data column)."""
    if not readable(table):
        return None
    names = table.metadata().partition_columns
    if not set(partitions) <= set(names):
        return None
    schema = pa.schema(table.schema().to_arrow())
    adds = pa.table(table.get_add_actions(flatten=True))
    chosen = _chosen(adds, partitions)
    counts = chosen.column("num_records")
    if counts.null_count:  # a file without statistics: delta-rs counts its rows
        return None
    if (pc.sum(counts).as_py() or 0) > cap:
        raise TooMany(f"{root}: more than {cap} rows in {dict(partitions)}")
    shape = _shape(schema)  # cached files are kept per schema: a table may evolve
    pieces = []
    for file, values in zip(chosen.column("path").to_pylist(),
                            chosen.select([f"partition.{n}" for n in names]).to_pylist(),
                            strict=True):
        where = {n: values[f"partition.{n}"] for n in names}
        pieces.append(_decoded((root, file, shape), where, schema, files))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


class TooMany(Exception):
    """A read would decode more rows than its caller reads on the driver: nothing decoded."""


def readable(table: Any) -> bool:
    """Whether this module reads ``table``'s files: turned on, and no reader feature that
    changes what a file's rows are (deletion vectors, column mapping)."""
    protocol = table.protocol()
    features = set(protocol.reader_features or ())
    return BUDGET > 0 and (protocol.min_reader_version == 1 or (
        protocol.min_reader_version >= 3 and features <= _PLAIN_READS))


def added(root: str, schema: pa.Schema, files: Any, version: int,
          take: FileKeep | None = None, cap: int | None = None) -> pa.Table | None:
    """The rows commit ``version`` added (its change feed's inserts) with
    ``_commit_version``, from its commit file and its data files; None where the commit
    is not plain appends (a change-data file, a data-changing remove) or its file is
    gone. ``take``: which of its files to read, by their partition values and the version
    (a head read skips the partitions whose cursor is past it without decoding them).
    ``TooMany`` before anything is decoded where the files taken hold more than ``cap``
    rows (or do not say how many)."""
    adds = _adds(root, version)
    if adds is None:
        return None
    shape = _shape(schema)
    typed = [(file, _typed(raw, schema), rows) for file, raw, rows in adds]
    taken = [t for t in typed if take is None or take(t[1], version)]
    if cap is not None and sum(cap + 1 if rows is None else rows
                               for _, _, rows in taken) > cap:
        raise TooMany(f"{root}: commit {version} adds more than {cap} rows to read")
    pieces = [_decoded((root, file, shape), values, schema, files)
              for file, values, _ in taken]
    whole = pa.concat_tables(pieces) if pieces else schema.empty_table()
    return whole.append_column("_commit_version",
                               pa.array([version] * whole.num_rows, pa.int64()))


@functools.lru_cache(maxsize=64)
def _shape(schema: pa.Schema) -> str:
    return str(schema.to_string())


@functools.lru_cache(maxsize=4096)  # a commit file never changes once written, and an
def _adds(root: str, version: int  # entity's tables are made new at a new root each time
          ) -> tuple[tuple[str, tuple[tuple[str, str | None], ...], int | None], ...] | None:
    """The data files commit ``version`` added with their partition values (as the log
    writes them) and row counts (from their statistics, None where they have none), or
    None where its change feed is not its adds."""
    try:
        actions = commit_actions(log_files(root), version)
    except OSError:
        return None
    found = []
    for action in actions:
        remove = action.get("remove")
        if "cdc" in action or (remove is not None and remove.get("dataChange", True)):
            return None
        add = action.get("add")
        if add is not None and add.get("dataChange", True):
            found.append((str(add["path"]), tuple(sorted(add["partitionValues"].items())),
                          _rows(add)))
    return tuple(found)


def _rows(add: Mapping[str, Any]) -> int | None:
    """An add action's row count, from its statistics."""
    try:
        return int(json.loads(add.get("stats") or "{}")["numRecords"])
    except (KeyError, TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=4096)
def _typed(values: tuple[tuple[str, str | None], ...], schema: pa.Schema
           ) -> Mapping[str, Any]:
    """A file's partition values (strings in the log) as the schema's types."""
    return {name: None if text is None else
            pa.array([text], pa.string()).cast(schema.field(name).type)[0].as_py()
            for name, text in values}


def _chosen(adds: pa.Table, partitions: Mapping[str, Sequence[Any]]) -> pa.Table:
    """The add actions in the named partitions."""
    keep = None
    for name, values in partitions.items():
        column = adds.column(f"partition.{name}")
        clause = pc.is_in(column, pa.array(list(values), column.type))
        keep = clause if keep is None else pc.and_(keep, clause)
    return adds if keep is None else adds.filter(keep)


def _decoded(key: tuple[str, str, str], values: Mapping[str, Any], schema: pa.Schema,
             files: Any) -> pa.Table:
    """One data file's rows with its partition columns, from memory or read once
    (``key``: the table, the file, the schema)."""
    with _lock:
        found = _files.get(key)
        if found is not None:
            _files.move_to_end(key)
            return found
    found = _read(unquote(key[1]), values, schema, files)
    with _lock:
        if key not in _files:
            _files[key] = found
            _held[0] += found.nbytes
        while _held[0] > BUDGET and len(_files) > 1:
            _, dropped = _files.popitem(last=False)
            _held[0] -= dropped.nbytes
    return found


def _read(file: str, values: Mapping[str, Any], schema: pa.Schema, files: Any) -> pa.Table:
    """Read one file as delta-rs's dataset would: the table's schema, the partition columns
    from the file's partition values (a Delta data file does not hold them)."""
    expression = None
    for name, value in values.items():
        clause = pc.field(name).is_null() if value is None else pc.field(name) == value
        expression = clause if expression is None else expression & clause
    fragment = _FORMAT.make_fragment(file, filesystem=files,
                                     partition_expression=expression)
    return ds.FileSystemDataset([fragment], schema, _FORMAT, files).to_table()
