"""An S3 API server on 127.0.0.1 for the tests (issue 44): moto's server, started as a
process of its own (moto in a thread of the test process would share its interpreter lock
with delta-rs's calls, which may hold it while they wait on the server), on a free port,
with the AWS environment that points the driver's store clients at it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ports import free_port

BUCKET = "sbq-test"
# Test credentials: moto accepts any; named so that a leak check can look for them.
ACCESS_KEY = "AKIASBQUEUETESTKEY01"
SECRET_KEY = "sbqueue-test-secret-do-not-log-0123456789"


@contextmanager
def moto_server(access_log: Path | None = None) -> Iterator[str]:
    """A moto server process; its endpoint URL. Stopped at the end. ``access_log``: where
    its log of requests (one line each) goes."""
    port = free_port()
    log = open(access_log, "w") if access_log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=log)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start on port {port}") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if access_log:
            log.close()  # type: ignore[union-attr]


def aws_env(endpoint: str) -> dict[str, str]:
    """The AWS environment a user of an S3-compatible store sets."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1"}


def make_bucket(endpoint: str, bucket: str = BUCKET) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name="us-east-1")
    with suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=bucket)


def fresh_root(scheme: str = "s3") -> str:
    """A namespace root no other test uses."""
    return f"{scheme}://{BUCKET}/ns-{uuid.uuid4().hex[:12]}"


def set_env(endpoint: str) -> dict[str, str | None]:
    """Point this process's AWS environment at ``endpoint``; what it held before."""
    before: dict[str, str | None] = {}
    for key, value in aws_env(endpoint).items():
        before[key] = os.environ.get(key)
        os.environ[key] = value
    return before
