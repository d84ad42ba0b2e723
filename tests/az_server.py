"""An Azure Blob server on 127.0.0.1 for the tests (issue 44 point 7): Azurite, the
storage emulator from npm, installed once per machine into sbqueue's cache and started as
a process of its own on a free port, with the environment that points obstore, delta-rs
and Arrow at it (``AZURE_STORAGE_USE_EMULATOR``, ``AZURITE_BLOB_STORAGE_URL``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ports import free_port, listening

AZURITE = "azurite@3.37.0"
CONTAINER = "sbq-test"
CACHE = Path(os.environ.get("SBQUEUE_CACHE", Path.home() / ".cache" / "sbqueue")) / "azurite"
# Azurite's published development account (every emulator has it; not a secret).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_blob() -> Path | None:
    """Azurite's blob server script, installed from npm where missing; None without npm."""
    script = CACHE / "node_modules" / ".bin" / "azurite-blob"
    if script.exists():
        return script
    npm = shutil.which("npm")
    if npm is None:
        return None
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                    str(CACHE), AZURITE], check=True, timeout=600, stdin=subprocess.DEVNULL)
    return script if script.exists() else None


@contextmanager
def azurite() -> Iterator[str]:
    """An Azurite blob server process (its data in a folder removed at the end); its blob
    endpoint URL, the container made. RuntimeError where npm or node is missing."""
    script = azurite_blob()
    if script is None:
        raise RuntimeError("npm is needed to install Azurite (Debian: apt-get install npm)")
    port, data = free_port(), tempfile.mkdtemp(prefix="azurite-")
    proc = subprocess.Popen(
        [str(script), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", data,
         "--silent", "--skipApiVersionCheck", "--loose"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        if not listening(port, 60, lambda: proc.poll() is None, pause=0.1):
            raise RuntimeError(f"Azurite did not start on port {port}")
        make_container(endpoint)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:  # Azurite may not stop on SIGTERM at once
            proc.kill()
            proc.wait(10)
        shutil.rmtree(data, ignore_errors=True)


def make_container(endpoint: str, name: str = CONTAINER) -> None:
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient.from_connection_string(
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
        f"BlobEndpoint={endpoint}/{ACCOUNT};")
    client.create_container(name)


def azure_env(endpoint: str) -> dict[str, str]:
    """The environment a user of the emulator sets (obstore and delta-rs read it)."""
    return {"AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": endpoint}


def fresh_root() -> str:
    """A namespace root no other test uses."""
    return f"az://{CONTAINER}/ns-{uuid.uuid4().hex[:12]}"
