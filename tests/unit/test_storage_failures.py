"""Issue 21 point 4: storage failures told apart from other errors (``store.failures``),
by the texts the real failures carry (taken from Spark, Py4J and delta-rs on this machine),
and turned into one error naming the entity (``engine.storage_guard``). No Spark."""

from __future__ import annotations

import errno

import pytest

from sbqueue.engine.storage_guard import storage_failure, storage_guarded
from sbqueue.exceptions import MessageNotFoundError, StorageFailureError
from sbqueue.store.failures import MISSING, failed_table, storage_cause

DAMAGED = "its Delta log (_delta_log) is damaged or has a missing file"
TABLE = "/ns/entities/9da98fc5f64e4afeaf30c8d38fc6c1c4"
SEEN = {
    "read-only": (f"[TASK_WRITE_FAILED] Task failed while writing rows to file:{TABLE}/inbox."
                  f"\nCaused by: java.io.FileNotFoundException {TABLE}/inbox/partition_id=0/"
                  "part-00001.snappy.parquet (Read-only file system)"),
    "full": ("Failed to parse parquet: External: Generic LocalFileSystem error: Unable to "
             "copy data to file: No space left on device (os error 28)"),
    "missing": f"[DELTA_TABLE_NOT_FOUND] Delta table `{TABLE}/ledger` doesn't exist.",
    "damaged": (f"[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file://"
                f"{TABLE}/ledger/_delta_log/00000000000000000000.json. SQLSTATE: KD001\n"
                "Caused by: com.fasterxml.jackson.core.JsonParseException: Unexpected "
                "character ('n' (code 110))"),
    "history": ("An error occurred while calling o81.sql.\n: org.apache.spark.SparkException: "
                "Job aborted: com.fasterxml.jackson.core.JsonParseException: Unexpected "
                "character ('n' (code 110))\n\tat org.apache.spark.sql.delta.actions.Action$"
                ".fromJson(actions.scala:168)"),
}


@pytest.mark.parametrize(("kind", "cause"), [
    ("read-only", "the storage is read-only"), ("full", "the storage is full"),
    ("missing", MISSING), ("damaged", DAMAGED), ("history", DAMAGED)])
def test_each_failure_seen_is_named_by_its_cause(kind: str, cause: str) -> None:
    assert storage_cause(RuntimeError(SEEN[kind])) == cause


def test_the_cause_is_found_down_the_chain_and_by_errno() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "write failed")
        except OSError as inner:
            raise RuntimeError("commit failed") from inner
    except RuntimeError as outer:
        assert storage_cause(outer) == "the storage is full"


@pytest.mark.parametrize("text", [
    "division by zero", "[UNRESOLVED_COLUMN] A column `x` cannot be resolved",
    "[DELTA_CONCURRENT_APPEND] Files were added to partition", "_delta_log is fine"])
def test_other_errors_are_not_storage_failures(text: str) -> None:
    assert storage_cause(ValueError(text)) is None


def test_the_table_is_named_where_the_error_says_it() -> None:
    assert failed_table(RuntimeError(SEEN["damaged"])) == "ledger"
    assert failed_table(RuntimeError(SEEN["read-only"])) == "inbox"
    assert failed_table(RuntimeError("No space left on device")) is None


@storage_guarded
class _Store:
    path = "orders"

    def __init__(self, error: Exception) -> None:
        self.error, self.reloaded = error, False

    def _reload(self) -> None:
        self.reloaded = True

    def receive(self) -> None:
        raise self.error


def test_a_guarded_method_raises_one_error_naming_entity_table_and_cause() -> None:
    with pytest.raises(StorageFailureError) as info:
        _Store(RuntimeError(SEEN["damaged"])).receive()
    text = str(info.value)
    assert text.startswith("orders: its ledger table cannot be used: its Delta log")
    assert "receive was not carried out" in text
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_missing_table_asks_whether_the_entity_was_deleted() -> None:
    store = _Store(RuntimeError(SEEN["missing"]))
    with pytest.raises(StorageFailureError):
        store.receive()
    assert store.reloaded


@pytest.mark.parametrize("error", [MessageNotFoundError("no message 5"), KeyError("x")])
def test_other_errors_pass_a_guard_unchanged(error: Exception) -> None:
    with pytest.raises(type(error)) as info:
        _Store(error).receive()
    assert info.value is error
    assert storage_failure("orders", "receive", error) is None
