"""Small JSON documents (namespace and entity definitions) with atomic create, and
replace and delete conditioned on what was read.

A definition is one file. Create is exclusive, so two processes creating the same name get
one success and one ``DocumentExists``: locally by ``link(2)`` of a fully written temporary
file, on object stores by an insert-if-absent MERGE into a small Delta table. ``replace``
and ``delete`` given ``expected`` (the token ``read_versioned`` returned) change the
document only if it is still the one read, else raise ``DocumentConflict``: locally under a
per-document ``flock``, on object stores by a MERGE whose match condition compares the
stored body's hash, so Delta's optimistic concurrency lets only one of two writers win
(docs/decisions/020-safe-catalog.md). Knows nothing of Service Bus names.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import hashlib
import json
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from sbqueue.exceptions import (
    ServiceBusAuthorizationError,
    ServiceBusConnectionError,
    StorageConflictError,
)
from sbqueue.location import is_local, is_object_store, local_path
from sbqueue.spark.session import speaks_delta_errors
from sbqueue.store import deadline
from sbqueue.store.failures import storage_cause
from sbqueue.store.objects import files_at, no_bucket

__all__ = [
    "DeltaDocumentStore",
    "DocumentConflict",
    "DocumentExists",
    "DocumentStore",
    "LocalDocumentStore",
    "ObjectDocumentStore",
    "delta_documents",
    "open_document_store",
    "version_of",
]


class DocumentExists(Exception):
    """Exclusive create found the document already there."""


class DocumentConflict(Exception):
    """A conditional replace or delete found the document changed (or gone) since it was
    read: nothing was written; read it again and re-apply the change."""


def version_of(body: str | bytes) -> str:
    """The token of a stored body: its SHA-256 (what Delta's ``sha2(body, 256)`` gives)."""
    return hashlib.sha256(body.encode() if isinstance(body, str) else body).hexdigest()


class DocumentStore(Protocol):
    def read(self, name: str) -> dict[str, Any] | None: ...
    def read_versioned(self, name: str) -> tuple[dict[str, Any], str] | None: ...
    def create(self, name: str, doc: dict[str, Any]) -> None: ...
    def replace(self, name: str, doc: dict[str, Any], expected: str | None = None) -> None: ...
    def delete(self, name: str, expected: str | None = None) -> bool: ...
    def list(self, prefix: str = "") -> list[str]: ...
    def read_all(self, prefix: str) -> builtins.list[dict[str, Any]]: ...
    def lock(self, name: str) -> contextlib.AbstractContextManager[None]: ...


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


_SETTLED_NS = 200_000_000  # a document this old (by its mtime) is kept after a read


class LocalDocumentStore:
    """Documents under a local folder; safe across threads and processes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        # the bytes last read of each document, by the file's identity: an entity's
        # definition and fences are read on every operation, and a document is written
        # as a new file (a new inode), so a stat tells whether they are still the same
        self._seen: dict[str, tuple[tuple[int, int, int], bytes, str]] = {}

    def _path(self, name: str) -> Path:
        return self.folder / name

    def read(self, name: str) -> dict[str, Any] | None:
        found = self.read_versioned(name)
        return None if found is None else found[0]

    def read_versioned(self, name: str) -> tuple[dict[str, Any], str] | None:
        """The document and its token (the hash of its bytes), or None."""
        path = str(self._path(name))
        try:
            with _authorized():
                found = os.stat(path)
                key = (found.st_ino, found.st_mtime_ns, found.st_size)
                seen = self._seen.get(path)
                if seen is None or seen[0] != key:
                    raw = Path(path).read_bytes()  # replaced meanwhile: a new key next time
                    seen = (key, raw, version_of(raw))
                    # kept only once its time is past the clock's grain: a replacement
                    # made later (its inode maybe reused, of the same size) has a later one
                    if time.time_ns() - found.st_mtime_ns > _SETTLED_NS:
                        self._seen[path] = seen
        except FileNotFoundError:
            return None
        data: dict[str, Any] = json.loads(seen[1])
        return data, seen[2]

    def _check(self, name: str, expected: str | None) -> bool:
        """Whether the document is there and (given ``expected``) still the one read;
        DocumentConflict where it changed. Called under the document's lock."""
        found = self.read_versioned(name)
        if expected is not None and (found is None or found[1] != expected):
            raise DocumentConflict(name)
        return found is not None

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

    def replace(self, name: str, doc: dict[str, Any], expected: str | None = None) -> None:
        """Write ``doc`` whole (readers see the old or the new file, never a mix); with
        ``expected``, only over the version read (compared under the document's lock)."""
        deadline.check()
        temp = self._stage(name, doc)
        try:
            with self.lock(f"doc/{name}"):
                self._check(name, expected)
                with _authorized():
                    os.replace(temp, self._path(name))
        finally:
            temp.unlink(missing_ok=True)

    def delete(self, name: str, expected: str | None = None) -> bool:
        deadline.check()
        with self.lock(f"doc/{name}"):
            if not self._check(name, expected):
                return False
            with _authorized():
                self._path(name).unlink()
            return True

    def list(self, prefix: str = "") -> list[str]:
        folder = self.folder / prefix
        if not folder.is_dir():
            return []
        return sorted(
            f"{prefix}{p.name}" if not prefix or prefix.endswith("/") else f"{prefix}/{p.name}"
            for p in folder.iterdir()
            if p.is_file() and not p.name.startswith(".")
        )

    def read_all(self, prefix: str) -> builtins.list[dict[str, Any]]:
        """The documents ``list(prefix)`` names (one gone meanwhile is left out)."""
        docs = (self.read(n) for n in self.list(prefix))
        return [d for d in docs if d is not None]

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
        speaks_delta_errors(spark)
        self._spark = spark
        self._table = f"delta.`{folder.rstrip('/')}/_sbqueue/documents`"
        spark.sql(f"CREATE TABLE IF NOT EXISTS {self._table} (name STRING, body STRING) "
                  "USING delta")

    def _rows(self) -> Any:
        return self._spark.sql(f"SELECT name, body FROM {self._table}")

    def read(self, name: str) -> dict[str, Any] | None:
        found = self.read_versioned(name)
        return None if found is None else found[0]

    def read_versioned(self, name: str) -> tuple[dict[str, Any], str] | None:
        """The document and its token (the SHA-256 of the stored body), or None."""
        from pyspark.sql import functions as F

        row = self._rows().where(F.col("name") == name).select("body").first()
        return None if row is None else (dict(json.loads(row[0])), version_of(row[0]))

    def _merge(self, name: str, doc: dict[str, Any] | None, expected: str | None,
               clauses: str) -> Any:
        """One MERGE of the row (name, body, expected) into the table; its metrics row.
        The condition on ``expected`` is in the statement, so Delta's conflict check (two
        commits rewriting the same file: one aborts, and its re-run no longer matches)
        decides between concurrent writers, not this process."""
        body = None if doc is None else json.dumps(doc, sort_keys=True, default=str)
        source = self._spark.createDataFrame(
            [(name, body, expected)], "name string, body string, expected string")
        view = f"_sbqueue_doc_{uuid.uuid4().hex}"
        source.createOrReplaceTempView(view)
        deadline.check()
        try:  # each attempt reads the newest version
            result = _retry_conflicts(lambda: self._spark.sql(
                f"MERGE INTO {self._table} t USING {view} s ON t.name = s.name {clauses}"))
        finally:
            self._spark.catalog.dropTempView(view)
        return result.first() if result is not None else None

    def create(self, name: str, doc: dict[str, Any]) -> None:
        row = self._merge(name, doc, None, "WHEN NOT MATCHED THEN INSERT (name, body) "
                          "VALUES (s.name, s.body)")
        if row is None or int(row["num_inserted_rows"]) == 0:
            raise DocumentExists(name)

    def replace(self, name: str, doc: dict[str, Any], expected: str | None = None) -> None:
        if expected is None:
            self._merge(name, doc, None, "WHEN MATCHED THEN UPDATE SET t.body = s.body "
                        "WHEN NOT MATCHED THEN INSERT (name, body) VALUES (s.name, s.body)")
            return
        row = self._merge(name, doc, expected, f"WHEN MATCHED AND {_SAME} "
                          "THEN UPDATE SET t.body = s.body")
        if row is None or int(row["num_updated_rows"]) == 0:
            raise DocumentConflict(name)

    def delete(self, name: str, expected: str | None = None) -> bool:
        guard = "" if expected is None else f" AND {_SAME}"
        row = self._merge(name, None, expected, f"WHEN MATCHED{guard} THEN DELETE")
        if row is not None and int(row["num_deleted_rows"]) > 0:
            return True
        if expected is not None:
            raise DocumentConflict(name)
        return False

    def _under(self, prefix: str) -> builtins.list[tuple[str, str]]:
        """(name, body) of the documents directly under ``prefix``, in one query."""
        from pyspark.sql import functions as F

        base = f"{prefix.rstrip('/')}/" if prefix else ""
        rows = self._rows().where(F.col("name").startswith(base)).collect()
        return sorted((r[0], r[1]) for r in rows if "/" not in r[0][len(base):])

    def list(self, prefix: str = "") -> list[str]:
        return [name for name, _ in self._under(prefix)]

    def read_all(self, prefix: str) -> builtins.list[dict[str, Any]]:
        """Every document under ``prefix`` in one Spark query (a listing read one by one
        would be a query per entity)."""
        return [dict(json.loads(body)) for _, body in self._under(prefix)]

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Object stores have no cross-cluster lock; exclusive create still guards creates."""
        yield


class ObjectDocumentStore:
    """Documents as objects under an S3 prefix (obstore), no Spark: create is a conditional
    write that succeeds only where no object is (``If-None-Match: *``); ``replace`` and
    ``delete`` given ``expected`` write only over the object read (``If-Match`` its entity
    tag, after its hash matched). A deleted document is an empty object (a conditional
    write can empty it; no conditional delete is in reach), which reads as absent and which
    a create replaces (decision 040)."""

    def __init__(self, files: Any) -> None:
        self.files = files  # store.objects.ObjectFiles of the namespace root

    def _get(self, name: str) -> tuple[bytes, str] | None:
        import obstore

        try:
            got = obstore.get(self.files.store, self.files.key(name))
        except FileNotFoundError as exc:
            if no_bucket(exc):
                raise
            return None
        return bytes(got.bytes()), str(got.meta["e_tag"])

    def _put(self, name: str, body: bytes, mode: Any) -> bool:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        deadline.check()
        try:
            obstore.put(self.files.store, self.files.key(name), body, mode=mode)
            return True
        except (AlreadyExistsError, PreconditionError):
            return False

    def read(self, name: str) -> dict[str, Any] | None:
        found = self.read_versioned(name)
        return None if found is None else found[0]

    def read_versioned(self, name: str) -> tuple[dict[str, Any], str] | None:
        got = self._get(name)
        if got is None or not got[0]:
            return None
        data: dict[str, Any] = json.loads(got[0])
        return data, version_of(got[0])

    def create(self, name: str, doc: dict[str, Any]) -> None:
        if not self._claim(name, _body(doc)):
            raise DocumentExists(name)

    def _claim(self, name: str, body: bytes) -> bool:
        """Write ``body`` where there is no document (no object, or a deleted one's empty
        object, still empty); True where it was written. A retried request whose first
        try landed is refused too: it was ours if the object holds our bytes."""
        if self._put(name, body, "create"):
            return True
        got = self._get(name)
        if got is not None and got[0] == body:
            return True
        return got is not None and not got[0] and self._put(name, body, {"e_tag": got[1]})

    def _over(self, name: str, body: bytes, expected: str | None) -> bool:
        """Write ``body`` over the document if it is there (and still ``expected``);
        False where there is none; DocumentConflict where it changed."""
        got = self._get(name)
        if got is None or not got[0]:
            if expected is not None:
                raise DocumentConflict(name)
            return False
        if expected is not None and version_of(got[0]) != expected:
            raise DocumentConflict(name)
        if not self._put(name, body, {"e_tag": got[1]}):
            raise DocumentConflict(name)
        return True

    def replace(self, name: str, doc: dict[str, Any], expected: str | None = None) -> None:
        if not self._over(name, _body(doc), expected) and not self._claim(name, _body(doc)):
            raise DocumentConflict(name)

    def delete(self, name: str, expected: str | None = None) -> bool:
        return self._over(name, b"", expected)

    def list(self, prefix: str = "") -> list[str]:
        import obstore

        folder = prefix if not prefix or prefix.endswith("/") else f"{prefix}/"
        found = obstore.list_with_delimiter(self.files.store, self.files.key(folder))
        start = len(self.files.key(""))
        return sorted(o["path"][start:] for o in found["objects"]
                      if o["size"] and not o["path"].rsplit("/", 1)[-1].startswith("."))

    def read_all(self, prefix: str) -> builtins.list[dict[str, Any]]:
        docs = (self.read(n) for n in self.list(prefix))
        return [d for d in docs if d is not None]

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Object stores have no cross-process lock; conditional writes guard every change."""
        yield


def _reached(root: str, store: ObjectDocumentStore) -> ObjectDocumentStore:
    """``store`` once one request reached it; else the one error a user can act on: the
    bucket, the endpoint or the credentials, named by variable (S1.1)."""
    try:
        store.read("_sbqueue/namespace.json")
    except Exception as exc:
        cause = storage_cause(exc)
        if cause is None:
            raise
        raise ServiceBusConnectionError(f"namespace {root!r}: {cause} (S1.1)") from None
    return store


def _body(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, indent=1, sort_keys=True, default=str).encode()


_SAME = "sha2(t.body, 256) = s.expected"  # the stored body is still the one read


def _retry_conflicts(operation: Callable[[], Any], attempts: int = 8) -> Any:
    """Re-run a document MERGE that lost a race with a concurrent writer; past the budget,
    the SDK's server-busy error (nothing was written)."""
    from sbqueue.store.guarded import DELTA_CONFLICTS  # imports Spark: only when needed

    for attempt in range(attempts):
        try:
            return operation()
        except DELTA_CONFLICTS as exc:
            if attempt == attempts - 1:
                raise StorageConflictError(
                    f"the namespace's catalog table kept changing under {attempts} attempts "
                    f"to write it ({type(exc).__name__}); nothing was written: try again"
                ) from None
            time.sleep(0.05 * (2 ** attempt) * (0.5 + random.random()))
    return None


_DOCUMENTS = "SBQUEUE_DOCUMENTS"  # "delta": the object stores' catalog on a local folder too


def delta_documents(root: str) -> bool:
    """Whether the catalog at ``root`` is the Delta document store: on object stores, and
    on a local folder where ``SBQUEUE_DOCUMENTS=delta`` asks for it (so tests run the
    object-store path on this machine, decision 020)."""
    chosen = os.environ.get(_DOCUMENTS, "").strip().lower()
    if chosen not in ("", "local", "delta"):
        raise ValueError(f"{_DOCUMENTS}={chosen!r}: expected 'delta' or 'local' (or unset)")
    return not (is_local(root) or is_object_store(root)) or (
        is_local(root) and chosen == "delta")


def open_document_store(root: str, spark: Any | None = None) -> DocumentStore:
    if is_object_store(root):
        return _reached(root, ObjectDocumentStore(files_at(root)))
    if not delta_documents(root):
        return LocalDocumentStore(local_path(root))
    if spark is None:
        raise ValueError(f"a SparkSession is needed to reach {root}")
    return DeltaDocumentStore(spark, str(local_path(root)) if is_local(root) else root)
