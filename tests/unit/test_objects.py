"""``store.objects`` on a local folder, and the store's refusal of Spark commits on S3
(decision 040). Pure: files in a temporary folder, no Spark, no server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from sbqueue.exceptions import StorageFailureError
from sbqueue.store.logfiles import commit_actions, commit_name, publish
from sbqueue.store.objects import LocalFiles, files_at
from sbqueue.store.sql import spark_writes


def test_a_version_is_published_once_and_read_back_line_by_line(tmp_path: Path) -> None:
    log = LocalFiles(tmp_path)
    body = json.dumps({"commitInfo": {"userMetadata": "a\u2028b"}}, ensure_ascii=False)
    assert publish(log, 3, body + "\n" + json.dumps({"add": {"path": "x"}}) + "\n")
    assert not publish(log, 3, "{}\n")  # taken: the first stays
    actions = commit_actions(log, 3)  # U+2028 inside a JSON string is not a line break
    assert actions == [{"commitInfo": {"userMetadata": "a\u2028b"}}, {"add": {"path": "x"}}]
    assert (tmp_path / commit_name(3)).exists()
    assert not [n for n in log.names() if n.endswith(".tmp")]  # no temporary file left


def test_a_commit_into_a_log_folder_that_is_gone_makes_no_folder(tmp_path: Path) -> None:
    """A table deleted under an append stays deleted: publishing fails, nothing appears."""
    log = files_at(str(tmp_path / "table")).child("_delta_log")
    with pytest.raises(FileNotFoundError):
        publish(log, 1, "{}\n")
    assert not (tmp_path / "table").exists()
    with pytest.raises(FileNotFoundError):
        log.names()
    log.prepare()
    assert log.names() == [] and publish(log, 0, "{}\n")


class _Conf:
    """A session's conf as ``has_s3a`` reads it (pure logic: which log store is set)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str = "") -> str:
        return self.values.get(key, default)


class _Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


def test_spark_commits_only_where_it_shares_the_commit_protocol(tmp_path: Path) -> None:
    """Decisions 040, 042: Spark commits to S3 only with the put-if-absent log store."""
    from sbqueue.spark.logstore import PUT_IF_ABSENT_CLASS

    plain = cast(Any, _Session({}))
    assert spark_writes(plain, str(tmp_path)) == str(tmp_path)
    assert spark_writes(plain, "abfss://c@a.dfs.core.windows.net/t") == \
        "abfss://c@a.dfs.core.windows.net/t"
    ours = cast(Any, _Session({f"spark.delta.logStore.{s}.impl": PUT_IF_ABSENT_CLASS
                               for s in ("s3", "s3a")}))
    for path in ("s3://b/ns/entities/x/inbox", "s3a://b/ns/entities/x/ledger"):
        with pytest.raises(StorageFailureError, match="does not commit to S3"):
            spark_writes(plain, path)
        assert spark_writes(ours, path) == path
