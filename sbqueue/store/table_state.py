"""What a table is, for the commits sbqueue writes on the driver (``store.tracked``'s
row-tracked appends, ``store.rewrite``'s partition rewrites and plain appends).

Why one home: every commit this process writes must first know the table's writer
protocol, schema and properties as of the version it commits after, and must refuse a
table it would write wrongly (a writer feature it does not honour, an invariant). Loading
that with delta-rs costs a log replay; a state kept per table and brought forward by the
commits made since (read file by file, no listing) costs a file read or two (decision
031). After a commit, ``store.checkpoints`` does what Spark does after its own: a checkpoint at
the table's interval, then the expired log files removed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from sbqueue.location import driver_uri
from sbqueue.store import checkpoints, snapshot
from sbqueue.store.checkpoints import CHECKPOINT_EVERY
from sbqueue.store.logfiles import (
    changes_table,
    commit_actions,
    commit_name,
    has_commit,
    next_commit,
    saw_latest,
    trusted,
)
from sbqueue.store.memo import ByIdentity
from sbqueue.store.objects import Files, storage_options

__all__ = ["CHECKPOINT_EVERY", "Refused", "TableState", "Unsupported", "changes_table",
           "committed", "probe", "refusal", "remember", "table_state"]

# Writer features honoured by a plain append of rows that match the table's schema
# (checked, ``refusal``) and hold no null in a NOT NULL column (``data_files.check_nulls``);
# a column invariant (``delta.invariants``) is refused, not evaluated.
_UNDERSTOOD = {"domainMetadata", "rowTracking", "invariants", "variantType", "changeDataFeed",
               "appendOnly"}
# Of those, what a rewrite (files removed) would write wrongly: row ids and commit versions
# kept across a rewrite, change-data files, an append-only table.
_NOT_REWRITTEN = {"rowTracking", "changeDataFeed", "appendOnly"}
logger = logging.getLogger("sbqueue.store")


class Unsupported(Exception):
    """This table or this moment needs another writer; nothing was committed."""


class Refused(Unsupported):
    """This table needs another writer for as long as it stays as it is (a writer feature,
    a column invariant or a schema this writer does not write); nothing was committed."""


_states: dict[str, TableState] = {}  # by log folder: this process's newest state of each table


@dataclass(frozen=True)
class TableState:
    """What an append checks a table against, as of ``version``: its writer protocol,
    schema (Arrow, as delta-rs maps it) and properties. ``identity`` is that version's
    commit file's (inode, or S3 entity tag): a table deleted and made again at the same
    path differs."""

    version: int
    identity: str | None
    writer_version: int
    features: frozenset[str]
    invariants: bool
    schema: pa.Schema
    config: Mapping[str, str]
    partition_by: tuple[str, ...] = ()
    high_water: int | None = None  # the row-id high-water mark at ``version``, where known


def table_state(path: str, log: Files) -> TableState:
    """The table's state at its latest version: this process's kept state brought forward
    by the commits made since (read one by one, no listing), loaded again with delta-rs
    where one of them changed protocol or metadata, or where none is kept. A kept version
    seen latest lately (``logfiles.trusted``: on an object store) is used without a look:
    the commit that follows it is put only where none is, and a writer that loses that
    race reads the commits it lost to (``store.rewrite._publish``)."""
    known = _states.get(log.where)
    if known is not None and trusted(log, known.version):
        return known
    if known is None or log.identity(commit_name(known.version)) != known.identity:
        return _load(path, log)
    version = known.version
    while (actions := next_commit(log, version + 1)) is not None:
        version += 1
        if changes_table(actions):
            return _load(path, log)
    saw_latest(log, version, known.config)
    return known if version == known.version else remember(log, known, version)


def _load(path: str, log: Files) -> TableState:
    """The state as delta-rs reads it (once per table and process, and after a change)."""
    from deltalake import DeltaTable

    table = DeltaTable(driver_uri(path), storage_options=storage_options(path))
    protocol = table.protocol()
    version = table.version()
    state = TableState(version, log.identity(commit_name(version)),
                       protocol.min_writer_version, frozenset(protocol.writer_features or []),
                       "delta.invariants" in table.schema().to_json(),
                       pa.schema(table.schema().to_arrow()),
                       dict(table.metadata().configuration),
                       tuple(table.metadata().partition_columns))
    _states[log.where] = state
    saw_latest(log, version, state.config)
    return state


def committed(path: str, log: Files, state: TableState, version: int, identity: str,
              high_water: int | None = None) -> None:
    """After this process published ``version`` over ``state`` (its file's ``identity``
    as the put returned it): keep the state as of it (with the row-id ``high_water`` mark
    it set, where it set one), move the kept snapshot to it (its actions as ``publish``
    kept them, no read), and checkpoint where the interval says. Never raises: the commit
    stands, and a caller told otherwise would write it again."""
    try:
        remember(log, state, version, identity, high_water)
        saw_latest(log, version, state.config)
        snapshot.advanced(path, version, commit_actions(log, version))
    except Exception as exc:
        logger.debug("state of %s not kept after %s: %r", path, version, exc)
    checkpoints.later(path, log, version, state.config)  # never raises either


def remember(log: Files, state: TableState, version: int, identity: str | None = None,
             high_water: int | None = None) -> TableState:
    """``state`` as of ``version`` (no protocol or metadata change up to it), kept;
    ``identity``: of that version's commit file, where the caller knows it."""
    newer = replace(state, version=version, high_water=high_water,
                    identity=identity or log.identity(commit_name(version)))
    kept = _states.get(log.where)
    if kept is None or kept.version <= version:
        _states[log.where] = newer
    return newer


def probe(log: Files, version: int) -> int:
    """The latest version, found from ``version`` (committed) forward, file by file."""
    while has_commit(log, version + 1):
        version += 1
    return version


def refusal(state: TableState, schema: pa.Schema, rewrite: bool = False) -> str | None:
    """Why this writer must not write rows of ``schema`` to the table (``rewrite``: and
    remove files from it); None: it may."""
    features = _features(state)
    unknown = sorted(features - _UNDERSTOOD)
    if unknown:
        return (f"writer features {unknown} (writer version {state.writer_version}) are not "
                "written by sbqueue's driver writer")
    if state.invariants:
        return "a column invariant (delta.invariants) is not checked by sbqueue's writer"
    if rewrite:
        barred = sorted(features & _NOT_REWRITTEN & _turned_on(state))
        if barred:
            return f"a rewrite by sbqueue's driver writer does not keep {barred}"
    if schema.equals(state.schema):  # rows made from the table's own schema: most writes
        return None
    theirs, ours = _shape(state.schema), _shape(schema)
    if theirs != ours:
        differ = [n for n in dict.fromkeys([*theirs, *ours]) if theirs.get(n) != ours.get(n)]
        return (f"the table's schema differs from the rows' in column(s) {differ} (made by "
                "another sbqueue version, or altered)")
    return None


# The features a legacy writer version implies (Delta's protocol), where it lists none.
_LEGACY = {1: set(), 2: {"appendOnly", "invariants"}, 3: {"checkConstraints"},
           4: {"changeDataFeed", "generatedColumns"}, 5: {"columnMapping"},
           6: {"identityColumns"}}


def _features(state: TableState) -> frozenset[str]:
    """The table's writer features, those a legacy writer version implies included."""
    if state.writer_version >= 7:
        return state.features
    return frozenset(set().union(*(_LEGACY[v] for v in range(1, state.writer_version + 1))))


def _turned_on(state: TableState) -> set[str]:
    """Of the features a rewrite does not keep, those the table uses: row tracking
    wherever supported, change data and append-only where their property is true."""
    def on(key: str) -> bool:
        return state.config.get(key, "").strip().lower() == "true"
    return {"rowTracking"} | ({"changeDataFeed"} if on("delta.enableChangeDataFeed") else set()
                              ) | ({"appendOnly"} if on("delta.appendOnly") else set())


def _shape_of(schema: pa.Schema) -> dict[str, Any]:
    """Each column's type and nullability, in order, as both sides can state them: a
    struct's fields by name (Parquet's are matched by name, and delta-rs orders a
    VARIANT's two fields otherwise than Spark), a list's element without its name."""
    def kind(t: pa.DataType) -> Any:
        if pa.types.is_struct(t):
            return ("struct", tuple(sorted((f.name, kind(f.type), f.nullable) for f in t)))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return ("list", kind(t.value_type), t.value_field.nullable)
        return str(t)
    return {f.name: (kind(f.type), f.nullable) for f in schema}


_shapes: ByIdentity[pa.Schema, dict[str, Any]] = ByIdentity()


def _shape(schema: pa.Schema) -> dict[str, Any]:
    """``_shape_of``, kept per schema object: a send compares the same two schemas on
    every commit (~0.3 ms each time)."""
    return _shapes.get(schema, _shape_of)
