"""A Delta table (local folder or S3) read and written on the driver, with delta-rs: no
Spark job.

Why (decision 011, step 3): a receive decides on a few hundred narrow rows, yet reading them
through Spark cost four jobs (the new snapshot's state reconstruction, data skipping, the
read itself and the inbox head), a second or more of a receive. ``deltalake`` (delta-rs, a
well-kept implementation of the same protocol) replays the log and reads the files a
partition filter selects in tens of milliseconds, in this process. It also commits here:
a ``Pinned`` table rewrites some partitions only if no later commit touched them (Delta's
conflict check, from the version read), and ``append`` is a blind append; both carry the
``marked`` tag as Spark's commits carry their user metadata. Row-tracked appends of the
inbox are ``store.tracked``'s; what the log says is ``store.log_reads``'.

Only for tables the local executor serves (``store.executor``: a local folder or an S3
prefix, decision 040): elsewhere,
and on any read this module cannot do (a change feed the log no longer holds, more rows
than ``ROW_LIMIT``), the functions return None and the caller goes through Spark.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import VariantVal

from sbqueue.exceptions import StorageConflictError
from sbqueue.location import driver_uri, is_local, is_object_store
from sbqueue.store import deadline, snapshot, warm
from sbqueue.store import rewrite as own
from sbqueue.store.executor import delta_rs_installed, spark_only
from sbqueue.store.objects import arrow_files, storage_options
from sbqueue.store.thresholds import ROW_LIMIT

__all__ = ["ROW_LIMIT", "Commit", "Conflict", "Pinned", "Refused", "append", "commits_enabled",
           "enabled", "latest", "marked", "native_files", "or_none", "pin", "plain_rows", "scan"]

_APPEND_TRIES = 20  # a blind append retried after concurrent commits
_COMMITS = "SBQUEUE_DRIVER_COMMITS"  # "0" turns a small receive's commits on the driver off

log = logging.getLogger("sbqueue.store")
T = TypeVar("T")
Row = dict[str, Any]
Keep = Callable[[Row], bool]
Commit = tuple[int, datetime, str, str | None]  # version, time, operation, user metadata
_mark: ContextVar[str | None] = ContextVar("sbqueue_driver_commit_mark", default=None)


@contextlib.contextmanager
def marked(tag: str) -> Iterator[None]:
    """The driver's commits made inside (in this thread or task) carry ``tag`` as their
    user metadata, as Spark's carry ``commitInfo.userMetadata``: maintenance tells its own
    commits from an entity's use by it (S16.3)."""
    token = _mark.set(tag)
    try:
        yield
    finally:
        _mark.reset(token)


def _commit_properties(tag: str | None = None) -> Any:
    """The commit properties naming ``tag`` (default: the ``marked`` one), or None."""
    from deltalake import CommitProperties

    tag = tag or _mark.get()
    return None if tag is None else CommitProperties(custom_metadata={"userMetadata": tag})


def enabled(path: str) -> bool:
    """Whether ``path`` can be read on the driver: a local folder or S3, delta-rs installed,
    and the local executor not refused (``store.executor``: asked for Spark, or a namespace
    opened through Spark Connect)."""
    return (is_local(path) or is_object_store(path)) and not spark_only(path) \
        and delta_rs_installed()


class Pinned:
    """A table as of the version it was opened at: its rows, and (where driver commits
    are on) one rewrite of some of its partitions that commits only if no commit after that
    version touched them (Delta's conflict check, from that version). The version and its
    files come from this process's snapshot (``store.snapshot``: the commits since the
    last read, no listing); a table the snapshot does not follow is delta-rs's."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.snap = snapshot.current(path)
        # else this thread's delta-rs table, held at its version until released
        self._table = _take(path) if self.snap is None else None
        self._held = self._table is not None

    @property
    def table(self) -> Any:
        """delta-rs's table at this version (loaded where the snapshot serves reads)."""
        if self._table is None:
            assert self.snap is not None
            self._table = open_table(self.path, self.snap.version)
        return self._table

    def release(self) -> None:
        """Give a delta-rs table back to this thread's cache (kept warm for the next read):
        after a rewrite, or where the caller decided not to write. Once only: a table given
        back may be taken by the next ``Pinned``, which must not share it with this one."""
        if self._held:
            self._held = False
            _give_back(self.path, self._table)

    def rows(self, partitions: Mapping[str, Sequence[Any]], columns: Sequence[str] | None,
             keep: Keep) -> list[Row] | None:
        """The rows in the named partitions (column -> values) that ``keep`` accepts;
        None when there are more than ``ROW_LIMIT`` or delta-rs cannot read them."""
        def read() -> list[Row] | None:
            files = native_files(self.path)
            snap = self.snap if warm.BUDGET > 0 else None
            try:
                if snap is not None:  # the files' Python rows, kept; None as partition_rows
                    kept = warm.partition_dicts(
                        self.path, snap.schema, snap.partition_by, lambda: snap.adds, files,
                        partitions, ROW_LIMIT, lambda rows: list(plain_rows(rows)))
                    return self._dataset_rows(partitions, columns, keep, files) \
                        if kept is None else _chosen_rows(kept, columns, keep)
                whole = warm.partition_table(self.path, self.table, files, partitions,
                                             ROW_LIMIT)
            except warm.TooMany:  # as delta-rs's count below: more than a driver read
                return None
            if whole is None:  # a table warm does not read: delta-rs's own dataset
                return self._dataset_rows(partitions, columns, keep, files)
            if whole.num_rows > ROW_LIMIT:  # the files of those partitions: no filter
                return None
            table = whole if columns is None else whole.select(list(columns))
            return [row for row in plain_rows(table.to_pylist()) if keep(row)]
        return or_none(read)

    def _dataset_rows(self, partitions: Mapping[str, Sequence[Any]],
                      columns: Sequence[str] | None, keep: Keep, files: Any) -> list[Row] | None:
        """``rows`` through delta-rs's own dataset (a table ``store.warm`` does not read)."""
        where = None
        for name, values in partitions.items():
            clause = pc.field(name).isin(list(values))
            where = clause if where is None else where & clause
        # delta-rs builds a fragment per file of the partitions named, not of the table:
        # measured, building them for every ledger file was most of a small receive.
        chosen = [(name, "in", [str(v) for v in values]) for name, values in partitions.items()]
        dataset = self.table.to_pyarrow_dataset(file_pruning_predicate=chosen, filesystem=files)
        if dataset.count_rows(filter=where) > ROW_LIMIT:
            return None
        table = dataset.to_table(filter=where, columns=None if columns is None else list(columns))
        return [row for row in plain_rows(table.to_pylist()) if keep(row)]

    def rewrite(self, scope: Sequence[Mapping[str, Any]], rows: list[Row]) -> None:
        """Replace every row of the partitions in ``scope`` (each: partition column ->
        value) with ``rows``, in one commit; ``Conflict`` (nothing committed) when a commit
        after this version touched them, ``Refused`` when neither sbqueue's writer
        (``store.rewrite``) nor delta-rs writes the table."""
        snap = self.snap
        schema = pa.schema(self.table.schema().to_arrow()) if snap is None else snap.schema
        names = schema.names  # a new list at each access: taken once
        data = pa.Table.from_pylist([{k: row.get(k) for k in names} for row in rows], schema)
        read = (self.table.version(), pa.table(self.table.get_add_actions(flatten=True))) \
            if snap is None else (snap.version, snap.adds)
        try:
            deadline.check()
            try:
                committed = own.rewrite(self.path, read, scope, data, _mark.get())
            except own.Unsupported as exc:  # a table or moment for delta-rs's writer
                log.debug("%s rewritten by delta-rs: %s", self.path, exc)
                self._rewrite_with_delta_rs(scope, data)
                return
            if committed is None:
                raise Conflict(f"{self.path}: a commit after version {read[0]} "
                               "changed the partitions this rewrite read")
        finally:
            self.release()

    def _rewrite_with_delta_rs(self, scope: Sequence[Mapping[str, Any]],
                               data: pa.Table) -> None:
        from deltalake import write_deltalake
        from deltalake.exceptions import CommitFailedError

        predicate = " OR ".join(
            "(" + " AND ".join(f"{name} = {_literal(value)}" for name, value in part.items())
            + ")" for part in scope)
        try:
            write_deltalake(self.table, data, mode="overwrite", predicate=predicate,
                            commit_properties=_commit_properties())
        except CommitFailedError as exc:
            _refuse(self.path, exc)
            raise Conflict(str(exc).split("\n")[0]) from None


def _chosen_rows(files: list[list[Row]], columns: Sequence[str] | None, keep: Keep
                 ) -> list[Row]:
    """The rows ``keep`` accepts of files kept as Python rows (shared: each copied, with
    ``columns`` only where named)."""
    if columns is None:
        return [dict(row) for rows in files for row in rows if keep(row)]
    names = list(columns)
    return [{name: row[name] for name in names} for rows in files for row in rows
            if keep(row)]


def append(path: str, rows: list[Row], tag: str) -> None:
    """Blind append of ``rows`` in one commit carrying ``tag`` as its user metadata (as
    ``store.delta.append``): by sbqueue's writer (``store.rewrite``), else by delta-rs.
    It reads nothing, so it may always be tried again: delta-rs refuses an append to a
    Serializable table when a concurrent commit removed files ("deleted data this
    operation read"); the next attempt lands after that commit. ``Refused`` (not retried)
    where delta-rs does not write the table."""
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    try:
        deadline.check()
        own.append(path, rows, tag)
        return
    except own.Unsupported as exc:
        log.debug("%s appended by delta-rs: %s", path, exc)
    for attempt in range(_APPEND_TRIES):
        table = latest(path)
        schema = pa.schema(table.schema().to_arrow())
        deadline.check()
        try:
            write_deltalake(
                table, pa.Table.from_pylist(rows, schema), mode="append",
                commit_properties=_commit_properties(tag))
            return
        except CommitFailedError as exc:
            _refuse(path, exc)
            log.debug("driver append to %s lost a race (try %d): %s", path, attempt + 1, exc)
            time.sleep(random.uniform(0, 0.02 * (attempt + 1)))
    raise StorageConflictError(
        f"{path}: a blind append lost {_APPEND_TRIES} races in a row to concurrent commits; "
        "nothing was appended")


class Conflict(Exception):
    """A rewrite found its partitions changed after the version it read: nothing
    committed."""


class Refused(Conflict):
    """delta-rs refuses to write the table (a table feature it lacks, such as in-commit
    timestamps): nothing committed, and ``commits_enabled`` is False for it in this
    process from now on, so the caller's retry of a rewrite commits with Spark."""


_refused: set[str] = set()  # tables delta-rs refused to write


def _refuse(path: str, exc: Exception) -> None:
    """Raise ``Refused`` where ``exc`` (a ``CommitFailedError``) is delta-rs refusing the
    table, not a commit lost to another (whose text says "Commit failed")."""
    text = str(exc).split("\n")[0]
    if "Unsupported table features" not in text:
        return
    _refused.add(driver_uri(path))
    log.warning("%s: delta-rs refuses to write it (%s); committing with Spark", path, text)
    raise Refused(f"{path}: delta-rs refuses to write it ({text}); nothing committed")


_tables = threading.local()  # per thread: path -> a DeltaTable kept at the latest version


def _cache() -> dict[str, Any]:
    found: dict[str, Any] = _tables.__dict__.setdefault("by_path", {})
    return found


def _take(path: str) -> Any:
    """This thread's table of ``path`` at its latest version, taken out of the cache (a
    ``Pinned`` holds it at that version; ``_give_back`` returns it). A full load replays
    the log from its checkpoint (15-20 ms measured, several a receive); bringing a kept
    table up to date reads only the commits made since."""
    from deltalake import DeltaTable

    table = _cache().pop(path, None)
    if table is not None:
        try:
            table.update_incremental()
            return table
        except Exception:  # a log cleaned up under it, a table replaced: load it again
            log.debug("reloading %s", path)
    return DeltaTable(driver_uri(path), storage_options=storage_options(path))


def open_table(path: str, version: int | None = None) -> Any:
    """A new delta-rs table of ``path`` at ``version`` (None: the latest)."""
    from deltalake import DeltaTable

    return DeltaTable(driver_uri(path), version=version, storage_options=storage_options(path))


def native_files(path: str) -> Any:
    """The table's folder through Arrow's own file system (local or S3), for its scans. delta-rs's
    default is a Python file system: every read it serves is a Python buffer that Arrow's
    worker threads release after the scan has returned, taking the GIL to do so; a worker
    still releasing one when the interpreter finalizes is ended mid-destructor and the
    process aborts ("terminate called without an active exception", decision 033)."""
    return arrow_files(path)


def _give_back(path: str, table: Any) -> None:
    _cache().setdefault(path, table)


def latest(path: str) -> Any:
    """The table at its latest version, for reads and blind appends (this thread's)."""
    table = _take(path)
    _give_back(path, table)
    return table


def pin(path: str) -> Pinned | None:
    """The table as of now, or None when it cannot be read here."""
    return or_none(lambda: Pinned(path)) if enabled(path) else None


def commits_enabled(path: str) -> bool:
    """Whether a receive may commit by rewriting its ledger partitions on the driver
    (on wherever driver reads are, unless delta-rs refused the table, ``Refused``;
    ``SBQUEUE_DRIVER_COMMITS=0`` turns it off)."""
    return (os.environ.get(_COMMITS, "1") != "0" and enabled(path)
            and driver_uri(path) not in _refused)


def scan(path: str, partitions: Mapping[str, Sequence[Any]], columns: Sequence[str] | None,
         keep: Keep) -> list[Row] | None:
    """The rows of the latest version in the named partitions (column -> values) that
    ``keep`` accepts, ``columns`` only (None: whole rows); None when it cannot be read
    here."""
    pinned = pin(path)
    if pinned is None:
        return None
    try:
        return pinned.rows(partitions, columns, keep)
    finally:
        pinned.release()  # kept: the next read only reads newer commits


def _literal(value: Any) -> str:
    if isinstance(value, int):
        return str(int(value))
    text = str(value)
    if not text.replace("_", "").isalnum():
        raise ValueError(f"partition value {text!r} is not a plain word")
    return f"'{text}'"


def plain_rows(rows: Iterable[Row]) -> Iterable[Row]:
    """Values as the Spark path hands them to the rules: aware UTC times, a VARIANT as
    PySpark's ``VariantVal``."""
    for row in rows:
        for name, value in row.items():
            if isinstance(value, datetime):
                row[name] = value.astimezone(timezone.utc)
            elif isinstance(value, dict) and value.keys() == {"value", "metadata"}:
                row[name] = VariantVal(value["value"], value["metadata"])
        yield row


def or_none(read: Callable[[], T]) -> T | None:
    """``read()``, or None where delta-rs could not do it (a protocol feature it lacks, a
    file gone under a vacuum): logged; the caller reads with Spark instead."""
    from deltalake.exceptions import DeltaError

    try:
        return read()
    except (DeltaError, OSError, ValueError, RuntimeError, pa.ArrowException) as exc:
        log.debug("driver read fell back to Spark: %r", exc)
        return None
