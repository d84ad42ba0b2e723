"""Issue 43: one module chooses a namespace's executor (``store.executor``), from what the
namespace and the session can do, and one switch forces it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sbqueue.exceptions import InvalidOperationError
from sbqueue.store import executor


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (executor.ENV, "SBQUEUE_DRIVER_READS", "SBQUEUE_DRIVER_COMMITS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(executor, "_spark_roots", set())


def test_auto_is_local_on_a_folder_and_s3_and_spark_elsewhere(tmp_path: Path) -> None:
    assert executor.choose(str(tmp_path), connect=False)[0] == "local"
    assert executor.choose(f"file://{tmp_path}", connect=False)[0] == "local"
    kind, why = executor.choose("abfss://c@a.dfs.core.windows.net/ns", connect=False)
    assert kind == "spark" and "neither a local folder nor an S3 or Azure Blob prefix" in why
    # issue 44 point 7: an az:// container prefix is the driver's (decision 051)
    assert executor.choose("az://container/ns", connect=False) == (
        "local", "an Azure Blob prefix, delta-rs installed")
    kind, why = executor.choose(str(tmp_path), connect=True)
    assert kind == "spark" and "Spark Connect" in why
    # issue 44: an S3 URL names one place for every process, a Connect client's too
    for root in ("s3://bucket/ns", "s3a://bucket/ns"):
        for connect in (False, True):
            assert executor.choose(root, connect=connect) == (
                "local", "an S3 prefix, delta-rs installed")


def test_s3_without_obstore_is_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "obstore_installed", lambda: False)
    kind, why = executor.choose("s3://bucket/ns", connect=False)
    assert kind == "spark" and "obstore" in why


@pytest.mark.parametrize("env", [{executor.ENV: "spark"}, {executor.ENV: " Spark "},
                                 {"SBQUEUE_DRIVER_READS": "0"}])
def test_the_switch_and_its_older_spelling_force_spark(env: dict[str, str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert executor.choose(str(tmp_path), connect=False)[0] == "spark"
    assert executor.spark_only(str(tmp_path / "q" / "inbox"))


def test_local_where_it_cannot_serve_is_refused_naming_why(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(executor.ENV, "local")
    assert executor.choose(str(tmp_path), connect=False) == ("local", "SBQUEUE_EXECUTOR=local")
    with pytest.raises(InvalidOperationError, match=r"SBQUEUE_EXECUTOR=local.*Spark Connect"):
        executor.choose(str(tmp_path), connect=True)
    with pytest.raises(InvalidOperationError, match="gs://b/ns is neither a local folder"):
        executor.choose("gs://b/ns", connect=False)


def test_an_unknown_value_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(executor.ENV, "driver")
    with pytest.raises(InvalidOperationError, match=r"SBQUEUE_EXECUTOR='driver'.*auto, local"):
        executor.choose(str(tmp_path), connect=False)


def test_a_namespace_opened_through_connect_keeps_its_tables_on_spark(tmp_path: Path) -> None:
    root, other = tmp_path / "ns", tmp_path / "other"
    assert executor.opened(str(root), connect=True) == "spark"
    assert executor.spark_only(str(root / "q" / "ledger"))
    assert executor.spark_only(f"file://{root}/q/inbox")
    assert not executor.spark_only(str(other / "q" / "ledger"))
    assert not executor.spark_only(f"{root}-2/q/ledger")  # a sibling, not a child
    assert executor.opened(str(other), connect=False) == "local"


def test_a_namespace_opened_on_spark_by_the_switch_is_local_once_the_switch_goes(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(executor.ENV, "spark")
    assert executor.opened(str(tmp_path), connect=False) == "spark"
    monkeypatch.delenv(executor.ENV)
    assert executor.opened(str(tmp_path), connect=False) == "local"
    assert not executor.spark_only(str(tmp_path / "q" / "ledger"))
