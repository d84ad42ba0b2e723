"""Issue 21 point 4: an entity whose storage fails (a damaged or missing Delta log file, a
full or read-only folder) fails with one clear error naming the entity and the cause
(``StorageFailureError``, docs/behaviour.md S17), changes nothing, and every other entity
keeps working, maintenance and forwarding included."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sbqueue.engine.maintain.job import Maintainer
from sbqueue.exceptions import StorageFailureError
from sbqueue.management import ServiceBusAdministrationClient

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _queues(admin, spark, names=("hurt", "whole")):  # type: ignore[no-untyped-def]
    out = []
    for name in names:
        admin.create_queue(name)
        queue = admin.namespace.entity(name)
        queue.send_dataframe(spark.range(3).selectExpr("CAST(id AS STRING) AS body"))
        out.append(queue)
    return out


def _still_works(queue) -> None:  # type: ignore[no-untyped-def]
    got = queue.receive_rows(10)
    assert len(got) == 3
    assert queue.settle([(r["sequence_number"], r["lock_token"]) for r in got],
                        "complete").settled == 3


def test_s17_a_damaged_log_file_fails_its_entity_alone(admin, spark) -> None:
    hurt, whole = _queues(admin, spark)
    newest = sorted(Path(hurt.ledger.path, "_delta_log").glob("*.json"))[-1]
    newest.write_text("{not json\n")

    for operation in (lambda: hurt.receive_rows(1), hurt.counts,
                      lambda: hurt.peek_rows(5)):
        with pytest.raises(StorageFailureError, match=r"^hurt: its ledger table cannot be "
                                                      r"used: its Delta log .* damaged"):
            operation()
    reports = {r.path: r for r in Maintainer(admin.namespace).run()}
    assert reports["hurt"].error is not None and "damaged" in reports["hurt"].error
    assert reports["whole"].error is None
    _still_works(whole)


def test_s17_a_missing_log_fails_its_entity_alone(admin, spark) -> None:
    hurt, whole = _queues(admin, spark)
    shutil.rmtree(Path(hurt.ledger.path, "_delta_log"))

    with pytest.raises(StorageFailureError, match=r"^hurt: .* Delta table is missing"):
        hurt.receive_rows(1)
    _still_works(whole)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MB folder of its own (tmpfs), to fill and to make read-only; skipped where this
    process may not mount."""
    root = tmp_path / "disk"
    root.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(root)],
                          capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small folder here: {made.stderr.decode().strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


def _read_only(root: Path) -> None:
    """Remount ``root`` read-only: refused while a file written there is still open, as a
    write a full disk aborted may keep one until its stream is collected."""
    for _ in range(30):
        made = subprocess.run(["mount", "-o", "remount,ro", str(root)], capture_output=True,
                              text=True, check=False)
        if made.returncode == 0:
            return
        time.sleep(1)
    held = subprocess.run(["bash", "-c", f"ls -l /proc/*/fd 2>/dev/null | grep {root}"],
                          capture_output=True, text=True, check=False).stdout
    raise AssertionError(f"cannot remount {root} read-only: {made.stderr} open: {held}")


def test_s17_a_full_then_read_only_folder_fails_clearly_and_changes_nothing(
        spark, small_disk: Path) -> None:
    admin = ServiceBusAdministrationClient(str(small_disk / "ns"), spark=spark)
    (queue,) = _queues(admin, spark, ("orders",))
    filler = small_disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M", "count=100"],
                   capture_output=True, check=False)

    with pytest.raises(StorageFailureError, match=r"^orders: .* the storage is full"):
        queue.send_dataframe(spark.range(5).selectExpr("CAST(id AS STRING) AS body"))
    with pytest.raises(StorageFailureError, match=r"^orders: .* the storage is full"):
        queue.receive_rows(1)
    os.remove(filler)
    assert queue.counts()["active"] == 3  # nothing of the failed send, no lock left

    _read_only(small_disk)
    try:
        with pytest.raises(StorageFailureError, match=r"^orders: .* read-only"):
            queue.receive_rows(1)
        assert queue.counts()["active"] == 3  # reads still work
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    _still_works(queue)
