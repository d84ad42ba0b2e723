"""Small JSON documents (namespace and entity definitions) with atomic create and replace.

A definition is one file. Create is exclusive, so two processes creating the same name get
one success and one ``DocumentExists``: locally by ``link(2)`` of a fully written temporary
file, on object stores by Hadoop's ``create(overwrite=false)`` (put-if-absent on ADLS/GCS).
Knows nothing of Service Bus names.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

__all__ = ["DocumentExists", "DocumentStore", "is_local", "local_path", "open_document_store"]


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


class LocalDocumentStore:
    """Documents under a local folder; safe across threads and processes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, name: str) -> Path:
        return self.folder / name

    def read(self, name: str) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self._path(name).read_text())
            return data
        except FileNotFoundError:
            return None

    def _stage(self, name: str, doc: dict[str, Any]) -> Path:
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
            os.link(temp, self._path(name))
        except FileExistsError:
            raise DocumentExists(name) from None
        finally:
            temp.unlink(missing_ok=True)

    def replace(self, name: str, doc: dict[str, Any]) -> None:
        os.replace(self._stage(name, doc), self._path(name))

    def delete(self, name: str) -> bool:
        try:
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
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class HadoopDocumentStore:
    """Documents on any Hadoop file system Spark can reach (abfss:, s3a:, gs:, ...)."""

    def __init__(self, spark: Any, folder: str) -> None:
        jvm = spark._jvm
        self._jvm = jvm
        self._folder = folder.rstrip("/")
        self._fs = jvm.org.apache.hadoop.fs.Path(self._folder).getFileSystem(
            spark._jsc.hadoopConfiguration()
        )

    def _path(self, name: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(f"{self._folder}/{name}")

    def read(self, name: str) -> dict[str, Any] | None:
        path = self._path(name)
        if not self._fs.exists(path):
            return None
        stream = self._fs.open(path)
        try:
            text = self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        data: dict[str, Any] = json.loads(text)
        return data

    def _write(self, name: str, doc: dict[str, Any], overwrite: bool) -> None:
        payload = json.dumps(doc, indent=1, sort_keys=True, default=str).encode()
        try:
            stream = self._fs.create(self._path(name), overwrite)
        except Exception as exc:
            if "FileAlreadyExists" in str(exc):
                raise DocumentExists(name) from None
            raise
        try:
            stream.write(bytearray(payload))
        finally:
            stream.close()

    def create(self, name: str, doc: dict[str, Any]) -> None:
        if self._fs.exists(self._path(name)):
            raise DocumentExists(name)
        self._write(name, doc, overwrite=False)

    def replace(self, name: str, doc: dict[str, Any]) -> None:
        self._write(name, doc, overwrite=True)

    def delete(self, name: str) -> bool:
        return bool(self._fs.delete(self._path(name), False))

    def list(self, prefix: str = "") -> list[str]:
        folder = self._path(prefix) if prefix else self._jvm.org.apache.hadoop.fs.Path(
            self._folder
        )
        if not self._fs.exists(folder):
            return []
        names = [s.getPath().getName() for s in self._fs.listStatus(folder) if s.isFile()]
        base = f"{prefix.rstrip('/')}/" if prefix else ""
        return sorted(f"{base}{n}" for n in names if not n.startswith("."))

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Object stores have no cross-cluster lock; exclusive create still guards creates."""
        yield


def open_document_store(root: str, spark: Any | None = None) -> DocumentStore:
    if is_local(root):
        return LocalDocumentStore(local_path(root))
    if spark is None:
        raise ValueError(f"a SparkSession is needed to reach {root}")
    return HadoopDocumentStore(spark, root)
