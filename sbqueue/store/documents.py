"""Small JSON documents (namespace and entity definitions) with atomic create and replace.

A definition is one file. Create is exclusive, so two processes creating the same name get
one success and one ``DocumentExists``: locally by ``link(2)`` of a fully written temporary
file, on object stores by an insert-if-absent MERGE into a small Delta table.
Knows nothing of Service Bus names.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from sbqueue.exceptions import ServiceBusAuthorizationError
from sbqueue.store import deadline

__all__ = [
    "DeltaDocumentStore",
    "DocumentExists",
    "DocumentStore",
    "LocalDocumentStore",
    "is_local",
    "local_path",
    "open_document_store",
]


class DocumentExists(Exception):
    """Exclusive create found the document already there."""


class DocumentStore(Protocol):
    def read(self, name: str) -> dict[str, Any] | None: ...
    def create(self, name: str, doc: dict[str, Any]) -> None: ...
    def replace(self, name: str, doc: dict[str, Any]) -> None: ...
    def delete(self, name: str) -> bool: ...
    def list(self, prefix: str = "") -> list[str]: ...
    def lock(self, name: str) -> contextlib.AbstractContextManager[None]: ...


def is_local(root: str) -> bool:
    scheme = urlparse(root).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(root: str) -> Path:
    """The absolute local path of a plain path or ``file:`` URI."""
    parsed = urlparse(root)
    raw = parsed.path if parsed.scheme == "file" else root
    return Path(raw).expanduser().resolve()


@contextlib.contextmanager
def _authorized() -> Iterator[None]:
    """A folder this process may not read or write is the SDK's authorization error,
    naming the path (not an OSError trace)."""
    try:
        yield
    except PermissionError as exc:
        raise ServiceBusAuthorizationError(
            f"{exc.filename}: this process may not read or write the namespace's folder "
            f"({exc.strerror}); give it the rights, or use another folder (S1.1)") from None


class LocalDocumentStore:
    """Documents under a local folder; safe across threads and processes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, name: str) -> Path:
        return self.folder / name

    def read(self, name: str) -> dict[str, Any] | None:
        try:
            with _authorized():
                data: dict[str, Any] = json.loads(self._path(name).read_text())
            return data
        except FileNotFoundError:
            return None

    def _stage(self, name: str, doc: dict[str, Any]) -> Path:
        with _authorized():
            return self._write_temp(name, doc)

    def _write_temp(self, name: str, doc: dict[str, Any]) -> Path:
        target = self._path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
        with open(temp, "w") as handle:
            json.dump(doc, handle, indent=1, sort_keys=True, default=str)
            handle.flush()
            os.fsync(handle.fileno())
        return temp

    def create(self, name: str, doc: dict[str, Any]) -> None:
        temp = self._stage(name, doc)
        try:
            deadline.check()
            with _authorized():
                os.link(temp, self._path(name))
        except FileExistsError:
            raise DocumentExists(name) from None
        finally:
            temp.unlink(missing_ok=True)

    def replace(self, name: str, doc: dict[str, Any]) -> None:
        deadline.check()
        with _authorized():
            os.replace(self._stage(name, doc), self._path(name))

    def delete(self, name: str) -> bool:
        deadline.check()
        try:
            with _authorized():
                self._path(name).unlink()
            return True
        except FileNotFoundError:
            return False

    def list(self, prefix: str = "") -> list[str]:
        folder = self.folder / prefix
        if not folder.is_dir():
            return []
        return sorted(
            f"{prefix}{p.name}" if not prefix or prefix.endswith("/") else f"{prefix}/{p.name}"
            for p in folder.iterdir()
            if p.is_file() and not p.name.startswith(".")
        )

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """An exclusive lock across processes (flock) on ``<folder>/.locks/<name>``."""
        path = self.folder / ".locks" / name
        with _authorized():
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(path, "a")  # noqa: SIM115 - closed below, after the lock
        with handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class DeltaDocumentStore:
    """Documents as rows of a small Delta table, for object stores (abfss:, gs:, s3a:, ...).

    Only Spark SQL, so it also works over Spark Connect, where neither the JVM nor (without
    Delta's Connect plugin) Delta's ``DeltaTable`` API is in reach. Exclusive create is a
    MERGE that inserts only when the name is absent: of two concurrent creators Delta lets
    one commit and the other's re-run finds the row.
    """

    def __init__(self, spark: Any, folder: str) -> None:
        from sbqueue.store.delta import speaks_delta_errors

        speaks_delta_errors(spark)
        self._spark = spark
        self._table = f"delta.`{folder.rstrip('/')}/_sbqueue/documents`"
        spark.sql(f"CREATE TABLE IF NOT EXISTS {self._table} (name STRING, body STRING) "
                  "USING delta")

    def _rows(self) -> Any:
        return self._spark.sql(f"SELECT name, body FROM {self._table}")

    def read(self, name: str) -> dict[str, Any] | None:
        from pyspark.sql import functions as F

        row = self._rows().where(F.col("name") == name).select("body").first()
        return None if row is None else dict(json.loads(row[0]))

    def _merge(self, name: str, doc: dict[str, Any], insert_only: bool) -> int:
        source = self._spark.createDataFrame(
            [(name, json.dumps(doc, sort_keys=True, default=str))], "name string, body string")
        update = "" if insert_only else " WHEN MATCHED THEN UPDATE SET t.body = s.body"
        view = f"_sbqueue_doc_{uuid.uuid4().hex}"
        source.createOrReplaceTempView(view)
        deadline.check()
        try:  # each attempt reads the newest version
            result = _retry_conflicts(lambda: self._spark.sql(
                f"MERGE INTO {self._table} t USING {view} s ON t.name = s.name{update} "
                "WHEN NOT MATCHED THEN INSERT *"))
        finally:
            self._spark.catalog.dropTempView(view)
        first = result.first() if result is not None else None
        return int(first["num_inserted_rows"]) if first is not None else 0

    def create(self, name: str, doc: dict[str, Any]) -> None:
        if self._merge(name, doc, insert_only=True) == 0:
            raise DocumentExists(name)

    def replace(self, name: str, doc: dict[str, Any]) -> None:
        self._merge(name, doc, insert_only=False)

    def delete(self, name: str) -> bool:
        if self.read(name) is None:
            return False
        quoted = name.replace("'", "''")
        deadline.check()
        _retry_conflicts(lambda: self._spark.sql(
            f"DELETE FROM {self._table} WHERE name = '{quoted}'"))
        return True

    def list(self, prefix: str = "") -> list[str]:
        from pyspark.sql import functions as F

        base = f"{prefix.rstrip('/')}/" if prefix else ""
        rows = self._rows().where(F.col("name").startswith(base)).select("name")
        return sorted(r[0] for r in rows.collect() if "/" not in r[0][len(base):])

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Object stores have no cross-cluster lock; exclusive create still guards creates."""
        yield


def _retry_conflicts(operation: Callable[[], Any], attempts: int = 8) -> Any:
    """Re-run a document MERGE or DELETE that lost a race with a concurrent writer."""
    from sbqueue.store.delta import DELTA_CONFLICTS  # imports Spark: only when needed

    for attempt in range(attempts):
        try:
            return operation()
        except DELTA_CONFLICTS:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (2 ** attempt) * (0.5 + random.random()))
    return None


def open_document_store(root: str, spark: Any | None = None) -> DocumentStore:
    if is_local(root):
        return LocalDocumentStore(local_path(root))
    if spark is None:
        raise ValueError(f"a SparkSession is needed to reach {root}")
    return DeltaDocumentStore(spark, root)
