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
import logging
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
from sbqueue.store.memo import ByIdentity, made_once

__all__ = ["BUDGET", "FileKeep", "TooMany", "added", "keep", "partition_dicts", "partition_rows",
           "partition_table", "plain_files", "readable", "rows_of"]

# Bytes of decoded files a process keeps at most (``SBQUEUE_WARM_BYTES``): a ledger file is
# a few KB to a few MB; the inbox's hold bodies, which is why there is a bound at all.
# 0 turns it off (every read through delta-rs's dataset, as before decision 044).
BUDGET = int(os.environ.get("SBQUEUE_WARM_BYTES", str(256 << 20)))

# Whether a data file may hold a row a read wants, by its partition values and the version
# that added it: decided before the file is decoded.
FileKeep = Callable[[Mapping[str, Any], int], bool]

log = logging.getLogger("sbqueue.store")
_lock = threading.Lock()
_files: OrderedDict[tuple[str, str, str], pa.Table] = OrderedDict()
_dicts: dict[tuple[str, str, str], list[dict[str, Any]]] = {}  # some files' Python rows
_held = [0]  # bytes in _files and _dicts
# A snapshot's files by partition: a receive asks twice at one version (its read, then its
# rewrite), by the add actions' identity.
_chosen_files: ByIdentity[pa.Table, dict[tuple[str | None, ...], list[Any]]] = ByIdentity()
# Reader features that leave a data file's rows as its Parquet rows: a VARIANT is a struct of
# two binaries in the file, as delta-rs's own dataset reads it.
_PLAIN_READS = frozenset({"variantType", "variantType-preview", "timestampNtz"})
_FORMAT = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True))


def partition_table(root: str, table: Any, files: Any,
                    partitions: Mapping[str, Sequence[Any]], cap: int) -> pa.Table | None:
    """Every row of the files of ``table``'s snapshot (delta-rs's) in the named partitions
    (partition column -> values), as ``partition_rows``; None where this module does not
    read the table (a reader feature, a partition filter on a data column)."""
    if not readable(table):
        return None
    return partition_rows(root, pa.schema(table.schema().to_arrow()),
                          table.metadata().partition_columns,
                          lambda: pa.table(table.get_add_actions(flatten=True)), files,
                          partitions, cap)


def partition_rows(root: str, schema: pa.Schema, names: Sequence[str],
                   adds: Callable[[], pa.Table], files: Any,
                   partitions: Mapping[str, Sequence[Any]], cap: int) -> pa.Table | None:
    """Every row of the live files (``adds``: their add actions, as delta-rs flattens
    them) in the named partitions, as one Arrow table of ``schema`` (``TooMany`` before
    anything is decoded where they hold more than ``cap`` rows); None where a partition
    filter names a data column or a file has no row count."""
    keys = _partition_files(root, schema, names, adds, partitions, cap)
    if keys is None:
        return None
    pieces = [_decoded(key, where, schema, files) for key, where in keys]
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


def partition_dicts(root: str, schema: pa.Schema, names: Sequence[str],
                    adds: Callable[[], pa.Table], files: Any,
                    partitions: Mapping[str, Sequence[Any]], cap: int,
                    plain: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
                    ) -> list[list[dict[str, Any]]] | None:
    """``partition_rows``' rows as Python rows (``plain`` makes them from a file's
    ``to_pylist``), one list per file, made once per file and kept beside it: a small
    receive reads its ledger partitions twice and converted them both times (a third of
    each read). The lists are shared: a caller copies a row before changing it."""
    keys = _partition_files(root, schema, names, adds, partitions, cap)
    if keys is None:
        return None
    out = []
    for key, where in keys:
        with _lock:
            found = _dicts.get(key)
        if found is None:
            made = plain(_decoded(key, where, schema, files).to_pylist())
            with _lock:  # kept while its file is, dropped with it; counted once
                found = _dicts.get(key)  # another thread's, made meanwhile
                if found is None:
                    found = made
                    if key in _files:
                        _dicts[key] = made
                        _held[0] += _dict_bytes(made)
        out.append(found)
    return out


def _dict_bytes(rows: list[dict[str, Any]]) -> int:
    """About what a file's Python rows hold (a dict entry and a boxed value per cell)."""
    return 96 * len(rows) * (len(rows[0]) if rows else 0)


def _partition_files(root: str, schema: pa.Schema, names: Sequence[str],
                     adds: Callable[[], pa.Table], partitions: Mapping[str, Sequence[Any]],
                     cap: int) -> list[tuple[tuple[str, str, str], dict[str, Any]]] | None:
    """The cache keys and partition values of the live files in the named partitions
    (``TooMany`` where they hold more than ``cap`` rows); None as ``partition_rows``."""
    if not set(partitions) <= set(names):
        return None
    live = adds()
    by_partition = _chosen_files.get(live, lambda t: _by_partition(root, schema, names, t))
    wanted = [(index, {_text(v) for v in partitions[n]})
              for index, n in enumerate(names) if n in partitions]
    chosen = [file for values, files in by_partition.items()
              if all(values[i] in texts for i, texts in wanted) for file in files]
    if any(rows is None for _, _, rows in chosen):  # no statistics: delta-rs counts rows
        return None
    if sum(rows or 0 for _, _, rows in chosen) > cap:
        raise TooMany(f"{root}: more than {cap} rows in {dict(partitions)}")
    return [(key, where) for key, where, _ in chosen]


def _text(value: Any) -> str | None:
    """A partition value as the log writes it (None: null)."""
    return None if value is None else str(value)


def _by_partition(root: str, schema: pa.Schema, names: Sequence[str], live: pa.Table
                  ) -> dict[tuple[str | None, ...], list[tuple[Any, dict[str, Any], int | None]]]:
    """A snapshot's live files (``live``: their add actions) by partition values (as
    text): each file's cache key, typed partition values and row count."""
    shape = _shape(schema)  # cached files are kept per schema: a table may evolve
    found: dict[tuple[str | None, ...], list[tuple[Any, dict[str, Any], int | None]]] = {}
    for file, values, rows in zip(
            live.column("path").to_pylist(),
            live.select([f"partition.{n}" for n in names]).to_pylist(),
            live.column("num_records").to_pylist(), strict=True):
        where = {n: values[f"partition.{n}"] for n in names}
        found.setdefault(tuple(_text(where[n]) for n in names), []).append(
            ((root, file, shape), where, rows))
    return found


class TooMany(Exception):
    """A read would decode more rows than its caller reads on the driver: nothing decoded."""


def readable(table: Any) -> bool:
    """Whether this module reads ``table``'s files: turned on, and ``plain_files``."""
    return BUDGET > 0 and plain_files(table)


def plain_files(table: Any) -> bool:
    """Whether ``table``'s data files hold its rows as written: no reader feature that
    changes what a file's rows are (deletion vectors, column mapping)."""
    protocol = table.protocol()
    features = set(protocol.reader_features or ())
    return protocol.min_reader_version == 1 or (
        protocol.min_reader_version >= 3 and features <= _PLAIN_READS)


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
    typed = [(file, _typed(raw, shape, schema), rows) for file, raw, rows in adds]
    taken = [t for t in typed if take is None or take(t[1], version)]
    if cap is not None and sum(cap + 1 if rows is None else rows
                               for _, _, rows in taken) > cap:
        raise TooMany(f"{root}: commit {version} adds more than {cap} rows to read")
    if not taken:  # most commits a head walk passes: other partitions' rows
        return _none_added(shape, schema)
    pieces = [_decoded((root, file, shape), values, schema, files)
              for file, values, _ in taken]
    whole = pa.concat_tables(pieces)
    return whole.append_column("_commit_version",
                               pa.array([version] * whole.num_rows, pa.int64()))


def _none_added(shape: str, schema: pa.Schema) -> pa.Table:
    """No rows of ``schema`` (its ``shape``), with ``_commit_version``."""
    return made_once(_empty, shape, lambda: schema.empty_table().append_column(
        "_commit_version", pa.array([], pa.int64())), 256)


# Caches keyed by a schema's text, not the schema: hashing a pa.Schema costs ~20 us (its
# fields, each time), and a head walk asks once per commit it passes; a string keeps its
# hash. ``_shape`` finds the text by the schema object's identity.
_shapes: ByIdentity[pa.Schema, str] = ByIdentity(256)
_empty: dict[str, pa.Table] = {}
_typed_values: dict[tuple[tuple[tuple[str, str | None], ...], str], Mapping[str, Any]] = {}


def _shape(schema: pa.Schema) -> str:
    return _shapes.get(schema, lambda kept: str(kept.to_string()))


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
                          rows_of(add)))
    return tuple(found)


def rows_of(add: Mapping[str, Any]) -> int | None:
    """An add action's row count, from its statistics."""
    try:
        return int(json.loads(add.get("stats") or "{}")["numRecords"])
    except (KeyError, TypeError, ValueError):
        return None


def _typed(values: tuple[tuple[str, str | None], ...], shape: str, schema: pa.Schema
           ) -> Mapping[str, Any]:
    """A file's partition values (strings in the log) as the schema's (``shape``) types."""
    return made_once(_typed_values, (values, shape), lambda: {
        name: None if text is None else
        pa.array([text], pa.string()).cast(schema.field(name).type)[0].as_py()
        for name, text in values}, 4096)


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
    _keep(key, found)
    return found


def keep(root: str, schema: pa.Schema, written: Sequence[tuple[str, pa.Table]]) -> None:
    """Keep each written file's rows (its path as the log names it; ``schema``, partition
    columns included) as that file decoded, in the table at ``root``: a file this process
    just committed is read by its next read without decoding it. Never raises: the commit
    stands (a caller told otherwise would write it again)."""
    if BUDGET <= 0:
        return
    try:
        shape = _shape(schema)
        for file, rows in written:
            _keep((root, file, shape), _as_schema(rows, schema))
    except Exception as exc:
        log.debug("written files of %s not kept decoded: %r", root, exc)


def _as_schema(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` as ``schema``, casting only the columns whose types differ (a send's rows
    differ from the log's schema in two: the VARIANT's field order, a list's item name;
    a whole-table cast made ~25 calls for a one-row file)."""
    if rows.schema.equals(schema):  # a ledger's rows, as a rewrite made them
        return rows
    if rows.schema.names != schema.names:
        return rows.cast(schema)
    columns = [column if column.type.equals(field.type) else column.cast(field.type)
               for column, field in zip(rows.columns, schema, strict=True)]
    return pa.Table.from_arrays(columns, schema=schema)


def _size(rows: pa.Table) -> int:
    """The bytes ``rows`` holds: its buffers' sizes added up (``nbytes`` looks for shared
    buffers first and cost ~0.1 ms for a one-row file)."""
    return int(rows.get_total_buffer_size())


def _keep(key: tuple[str, str, str], rows: pa.Table) -> None:
    with _lock:
        if key not in _files:
            _files[key] = rows
            _held[0] += _size(rows)
        while _held[0] > BUDGET and len(_files) > 1:
            gone, dropped = _files.popitem(last=False)
            _held[0] -= _size(dropped) + _dict_bytes(_dicts.pop(gone, []))


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
