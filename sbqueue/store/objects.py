"""The files of one folder of a store, a local folder or an S3 prefix, as the driver's
commits need them: read, put if absent, put, list, delete, and a file's identity.

The local executor writes Delta commits itself (``store.tracked``, ``store.created``) and
reads the log file by file (``store.logfiles``, ``store.row_ids``). Delta's one rule for a
writer on any store is that a version is claimed by creating its commit file only where
none is. A local folder does that with ``link(2)`` of a fully written temporary file
(decision 002); S3 with a conditional write (``If-None-Match: *``), which obstore sends for
``PutMode.Create`` and which delta-rs uses for its own commits on S3, so sbqueue's
commits and delta-rs's claim versions the same way (decision 040).

Credentials and endpoint come from the AWS environment a user already has
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION``), read by obstore and delta-rs themselves: sbqueue never holds a secret in a
structure it could log. (obstore 0.12 reads no ``AWS_PROFILE``: export a profile's keys.)
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import uuid
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from sbqueue.location import driver_uri, is_azure, is_local, is_s3, local_path, object_parts

__all__ = ["Files", "LocalFiles", "ObjectFiles", "arrow_files", "files_at", "no_bucket",
           "storage_options"]


class Files(Protocol):
    """The files under one folder, by name relative to it (``a/b.json``)."""

    where: str  # the folder, for messages and as a key of per-table state
    remote: bool  # each look is a request to a store (an object store), not a ``stat``

    def read(self, name: str) -> bytes: ...  # FileNotFoundError where there is none
    def exists(self, name: str) -> bool: ...
    # The new file's identity (``identity``); None: one was there.
    def put_if_absent(self, name: str, data: bytes) -> str | None: ...
    def put(self, name: str, data: bytes) -> None: ...
    def names(self) -> list[str]: ...  # the files directly in the folder
    def delete(self, name: str) -> None: ...  # no error where there is none
    def identity(self, name: str) -> str | None: ...  # changes when the file is made again
    def child(self, name: str) -> Files: ...
    def source(self, name: str) -> Any: ...  # what pyarrow reads a file from
    def prepare(self) -> None: ...  # the folder made where folders exist (a local disk)


class LocalFiles:
    """A folder of this machine."""

    remote = False

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.where = str(folder)

    def read(self, name: str) -> bytes:
        return (self.folder / name).read_bytes()

    def exists(self, name: str) -> bool:
        return (self.folder / name).exists()

    def put_if_absent(self, name: str, data: bytes) -> str | None:
        """``link(2)`` of a fully written temporary file: a reader never sees half a file,
        and of two writers exactly one creates it."""
        target = self.folder / name  # no folder made: a table deleted meanwhile stays gone
        temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                left = memoryview(data)
                while left:
                    left = left[os.write(fd, left):]
                inode = os.fstat(fd).st_ino  # the link's too: one inode
            finally:
                os.close(fd)
            os.link(temp, target)
            return str(inode)
        except FileExistsError:
            return None
        finally:
            with contextlib.suppress(OSError):
                temp.unlink(missing_ok=True)

    def put(self, name: str, data: bytes) -> None:
        target = self.folder / name
        try:
            target.write_bytes(data)
        except FileNotFoundError:  # a partition's first file: its folder made once
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def names(self) -> list[str]:
        return os.listdir(self.folder)  # FileNotFoundError where there is no folder

    def prepare(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.folder / name).unlink()

    def identity(self, name: str) -> str | None:
        try:
            return str(os.stat(self.folder / name).st_ino)
        except OSError:
            return None

    def child(self, name: str) -> LocalFiles:
        return LocalFiles(self.folder / name)

    def source(self, name: str) -> Any:
        return str(self.folder / name)  # read in place, only the columns asked


class ObjectFiles:
    """A prefix of an S3 bucket (obstore): put-if-absent by a conditional write."""

    remote = True

    def __init__(self, store: Any, prefix: str, where: str) -> None:
        self.store, self.prefix, self.where = store, prefix.strip("/"), where.rstrip("/")

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def read(self, name: str) -> bytes:
        import obstore

        return bytes(obstore.get(self.store, self.key(name)).bytes())

    def exists(self, name: str) -> bool:
        return self.identity(name) is not None

    def put_if_absent(self, name: str, data: bytes) -> str | None:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            made = obstore.put(self.store, self.key(name), data, mode="create")
            return str(made.get("e_tag") or self.identity(name))  # as a HEAD tells it
        except (AlreadyExistsError, PreconditionError):
            # A retried request whose first try landed is refused too: ours, if it holds
            # our bytes (a commit carries its own transaction id).
            try:
                return self.identity(name) if self.read(name) == data else None
            except FileNotFoundError:
                return None

    def put(self, name: str, data: bytes) -> None:
        import obstore

        obstore.put(self.store, self.key(name), data)

    def names(self) -> list[str]:
        import obstore

        found = obstore.list_with_delimiter(self.store, self.key(""))
        start = len(self.key(""))
        return [o["path"][start:] for o in found["objects"]]

    def delete(self, name: str) -> None:
        import obstore

        with contextlib.suppress(FileNotFoundError):
            obstore.delete(self.store, self.key(name))

    def identity(self, name: str) -> str | None:
        import obstore

        try:
            meta = obstore.head(self.store, self.key(name))
        except FileNotFoundError as exc:
            if no_bucket(exc):
                raise
            return None
        return str(meta.get("e_tag") or meta["last_modified"])

    def prepare(self) -> None:
        """Nothing: an S3 prefix exists as soon as an object is under it."""

    def child(self, name: str) -> ObjectFiles:
        return ObjectFiles(self.store, self.key(name), f"{self.where}/{name}")

    def source(self, name: str) -> Any:
        import pyarrow as pa

        return pa.BufferReader(self.read(name))


def no_bucket(exc: BaseException) -> bool:
    """Whether a not-found error is the bucket's or the container's (S3 and Azure answer
    404 for a key of one that does not exist too): not an absent file, a setup to fix."""
    text = str(exc)
    return "NoSuchBucket" in text or "ContainerNotFound" in text


def files_at(path: str) -> Files:
    """The files under ``path`` (a local folder, an ``s3://``/``s3a://`` or an ``az://``
    URL)."""
    if is_local(path):
        return LocalFiles(local_path(path))
    if is_s3(path) or is_azure(path):
        bucket, prefix = object_parts(path)
        store = _s3_store(bucket, _setup()) if is_s3(path) else _azure_store(bucket, _setup())
        return ObjectFiles(store, prefix, driver_uri(path))
    raise ValueError(f"{path}: the driver reads and writes local folders, S3 and Azure Blob "
                     "only")


def _allow_http() -> bool:
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT") or ""
    return urlparse(endpoint).scheme == "http"


_SETUP = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_REGION", "AWS_DEFAULT_REGION",
          "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
          *("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN",
            "AZURE_STORAGE_USE_EMULATOR", "AZURITE_BLOB_STORAGE_URL"))


def _setup() -> str:
    """A digest of the AWS environment (no value kept in clear): a client is made again
    when it changes (new credentials, another endpoint)."""
    joined = "\0".join(os.environ.get(k, "") for k in _SETUP)
    return hashlib.sha256(joined.encode()).hexdigest()


@functools.lru_cache(maxsize=16)
def _s3_store(bucket: str, setup: str) -> Any:
    """One obstore client per bucket and AWS environment (its connections are kept); its
    credentials, region and endpoint are the environment's, read by obstore (static keys or a
session token; an ``AWS_PROFILE`` is not read by obstore 0.12)."""
    from obstore.store import S3Store

    return S3Store(bucket, client_options={"allow_http": _allow_http()})


@functools.lru_cache(maxsize=16)
def _azure_store(container: str, setup: str) -> Any:
    """One obstore client per container and environment: its account, key or SAS token,
    and the emulator's switch (``AZURE_STORAGE_USE_EMULATOR``, Azurite) are the
    environment's, read by obstore as delta-rs reads them."""
    from obstore.store import AzureStore

    return AzureStore(container)


# Azurite's account and key: the storage emulator's published development credentials
# (not a secret: every emulator has them), which obstore and delta-rs use with the switch.
_EMULATOR_ACCOUNT = "devstoreaccount1"
_EMULATOR_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
                 "KBHBeksoGMGw==")


def emulated() -> bool:
    """Whether the environment points Azure clients at the storage emulator."""
    return os.environ.get("AZURE_STORAGE_USE_EMULATOR", "").strip().lower() in ("1", "true")


def storage_options(path: str) -> dict[str, str] | None:
    """What delta-rs needs besides the AWS environment it reads itself: the plain-HTTP
    permission an ``http://`` endpoint needs (a local S3 server). None for a local folder.
    No credential is put here (delta-rs reads them from the environment)."""
    if is_azure(path):
        return {}  # delta-rs reads the AZURE_* environment itself, as obstore does
    if not is_s3(path):
        return None
    return {"AWS_ALLOW_HTTP": "true"} if _allow_http() else {}



def arrow_files(path: str) -> Any:
    """The folder at ``path`` through one of Arrow's own file systems, for scans of a
    table's data files: the local one, or S3 with the AWS environment. delta-rs's default
    is a Python file system whose buffers Arrow's threads may release while the
    interpreter finalizes, which aborts the process (decision 033; seen on S3 too)."""
    from pyarrow import fs

    if is_local(path):
        return fs.SubTreeFileSystem(str(local_path(path)), fs.LocalFileSystem())
    bucket, prefix = object_parts(path)
    files = _arrow_s3(_setup()) if is_s3(path) else _arrow_azure(_setup())
    return fs.SubTreeFileSystem(f"{bucket}/{prefix}".rstrip("/"), files)


@functools.lru_cache(maxsize=4)
def _arrow_azure(setup: str) -> Any:
    """Arrow's Azure client for this environment: the account and key (or SAS token) of
    ``AZURE_STORAGE_*``, or the emulator's (``AZURITE_BLOB_STORAGE_URL``, else Azurite's
    default address, as obstore takes it)."""
    from pyarrow import fs

    if emulated():
        url = urlparse(os.environ.get("AZURITE_BLOB_STORAGE_URL") or "http://127.0.0.1:10000")
        return fs.AzureFileSystem(
            account_name=_EMULATOR_ACCOUNT, account_key=_EMULATOR_KEY,
            blob_storage_authority=url.netloc, dfs_storage_authority=url.netloc,
            blob_storage_scheme=url.scheme, dfs_storage_scheme=url.scheme)
    account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "")
    key = os.environ.get("AZURE_STORAGE_ACCOUNT_KEY")
    sas = os.environ.get("AZURE_STORAGE_SAS_TOKEN")
    return fs.AzureFileSystem(account_name=account, account_key=key, sas_token=sas)


@functools.lru_cache(maxsize=4)
def _arrow_s3(setup: str) -> Any:
    """Arrow's S3 client for this AWS environment (credentials from its default chain)."""
    from pyarrow import fs

    endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT") or ""
    parsed = urlparse(endpoint)
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return fs.S3FileSystem(endpoint_override=parsed.netloc or None,
                           scheme=parsed.scheme or "https", region=region)
