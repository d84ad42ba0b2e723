"""The driver's own Delta writers at their edges, against Spark (issue 41 item 4, decision
031): a table feature or schema Spark brought in later sends through Spark (and the
streaming sink, which has no Spark, names it); a change committed under a driver append
makes it step back; OPTIMIZE keeps the row ids and commit versions driver appends wrote
(DESIGN fact 6); the table's checkpoint interval and log retention hold when only the
driver sends; a ledger delta-rs refuses is committed by Spark, not retried as a conflict."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.types import StringType, StructField, StructType

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.datasource.sink import StreamSink, _Messages, outgoing
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.schema import INBOX_SCHEMA
from sbqueue.exceptions import InvalidOperationError
from sbqueue.location import local_path
from sbqueue.store import checkpoints, driver, table_state, tracked
from sbqueue.store.created import ENGINE
from sbqueue.store.logfiles import commit_actions, has_commit, log_files
from sbqueue.store.objects import Files

pytestmark = [pytest.mark.spark, pytest.mark.local_executor]

DAY = 86400
SENDS = StructType([StructField("body", StringType())])  # a streaming send's columns


def _log(table: Any) -> Files:
    return log_files(table.path)


def _log_path(table: Any) -> Path:
    return local_path(table.path) / "_delta_log"


def _latest(table: Any) -> int:
    version = 0
    while has_commit(_log(table), version + 1):
        version += 1
    return version


def _engines(table: Any, first: int) -> list[str]:
    """The engine of each commit from ``first`` on (``sbqueue-driver`` or Spark's)."""
    return [next(a["commitInfo"].get("engineInfo", "") for a in commit_actions(_log(table), v)
                 if "commitInfo" in a) for v in range(first, _latest(table) + 1)]


def _operations(table: Any, first: int) -> list[str]:
    return [next(a["commitInfo"]["operation"] for a in commit_actions(_log(table), v)
                 if "commitInfo" in a) for v in range(first, _latest(table) + 1)]


def _mark(table: Any, version: int) -> int:
    """The row-id high-water mark commit ``version`` set."""
    return next(int(json.loads(a["domainMetadata"]["configuration"])["rowIdHighWaterMark"])
                for a in commit_actions(_log(table), version) if "domainMetadata" in a)


def _receive_all(client: ServiceBusClient, queue: str) -> list[str]:
    receiver = client.get_queue_receiver(queue, max_wait_time=2)
    bodies: list[str] = []
    while batch := receiver.receive_messages(50, max_wait_time=1):
        bodies += [str(m) for m in batch]
        for m in batch:
            receiver.complete_message(m)
    return bodies


def _sink(root: str, entity: str, checkpoint: Path) -> StreamSink:
    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": "q-1"}) + "\n")
    return StreamSink({"namespace": root, "entity": entity,
                       "checkpointLocation": str(checkpoint)}, SENDS)


@pytest.mark.parametrize(("prop", "value", "feature"), [
    ("delta.enableInCommitTimestamps", "true", "inCommitTimestamp"),
    ("delta.enableDeletionVectors", "true", "deletionVectors"),
    ("delta.checkpointPolicy", "v2", "v2Checkpoint"),
])
def test_s2_1_a_feature_enabled_later_sends_through_spark_and_the_sink_names_it(
        spark: Any, admin: Any, namespace_root: str, tmp_path: Path, prop: str, value: str,
        feature: str) -> None:
    admin.create_queue("q")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages(ServiceBusMessage("before"))
        inbox = sender.entity.inbox
        spark.sql(f"ALTER TABLE {inbox.sql_name} SET TBLPROPERTIES ('{prop}' = '{value}')")
        altered = _latest(inbox)

        sender.send_messages(ServiceBusMessage("after"))

        assert ENGINE not in _engines(inbox, altered + 1)  # Spark's append, not ours
        with pytest.raises(InvalidOperationError, match=feature) as refused:
            _sink(namespace_root, "q", tmp_path / "cp").commit(
                [_Messages([outgoing(Row(body="streamed"))])], 0)
        assert "tried again" not in str(refused.value)
        assert _latest(inbox) == altered + 1  # the sink stored nothing
        assert sorted(_receive_all(client, "q")) == ["after", "before"]


def test_s2_1_a_column_added_by_a_user_sends_through_spark(
        spark: Any, admin: Any, namespace_root: str, tmp_path: Path) -> None:
    """The table's schema (as delta-rs holds it) is compared with the rows': Spark, which
    enforces the table's schema, appends to an inbox whose schema is not sbqueue's."""
    admin.create_queue("q")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages(ServiceBusMessage("before"))
        inbox = sender.entity.inbox
        spark.sql(f"ALTER TABLE {inbox.sql_name} ADD COLUMNS (note STRING)")
        altered = _latest(inbox)

        sender.send_messages(ServiceBusMessage("after"))

        assert ENGINE not in _engines(inbox, altered + 1)
        with pytest.raises(InvalidOperationError, match="note"):
            _sink(namespace_root, "q", tmp_path / "cp").commit(
                [_Messages([outgoing(Row(body="streamed"))])], 0)
        assert sorted(_receive_all(client, "q")) == ["after", "before"]


def test_a_spark_made_inbox_is_written_on_the_driver(spark: Any, tmp_path: Path) -> None:
    """The schema comparison takes Spark's own table as sbqueue's (a VARIANT's two fields
    are ordered otherwise by delta-rs than by Spark)."""
    inbox = Inbox(spark, str(tmp_path / "inbox"))
    inbox.create_empty(here=False)
    state = table_state.table_state(inbox.path, _log(inbox))
    assert table_state.refusal(state, tracked.arrow_schema(INBOX_SCHEMA)) is None


@pytest.mark.parametrize("change", [
    "SET TBLPROPERTIES ('sbqueue.note' = 'x')",  # metadata
    "SET TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",  # protocol too
])
def test_s2_1_a_change_committed_under_a_driver_append_sends_through_spark(
        spark: Any, admin: Any, namespace_root: str, monkeypatch: pytest.MonkeyPatch,
        change: str) -> None:
    """Spark alters the inbox after the driver append wrote its files and before it
    publishes: the append loses the version, sees the change in the commit it lost to,
    and steps back (nothing committed); the send goes through Spark, once."""
    admin.create_queue("q")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages(ServiceBusMessage("first"))
        inbox = sender.entity.inbox
        real, altered = tracked.publish, []

        def alter_first(log: Path, version: int, body: str) -> bool:
            if not altered:
                spark.sql(f"ALTER TABLE {inbox.sql_name} {change}")
                altered.append(version)
            return real(log, version, body)

        monkeypatch.setattr(tracked, "publish", alter_first)
        sender.send_messages(ServiceBusMessage("second"))

        assert _operations(inbox, altered[0])[0] == "SET TBLPROPERTIES"
        assert ENGINE not in _engines(inbox, altered[0])
        assert sorted(_receive_all(client, "q")) == ["first", "second"]


def test_optimize_keeps_the_row_ids_and_commit_versions_of_driver_appends(
        spark: Any, admin: Any, namespace_root: str) -> None:
    """DESIGN fact 6: the inbox's commit order and a topic's sequence numbers are its rows'
    ``_metadata.row_commit_version`` and ``row_id``; OPTIMIZE of files the driver wrote
    (row ids from their ``baseRowId``, versions from ``defaultRowCommitVersion``) keeps
    both, and the next driver append draws ids above them."""
    admin.create_queue("q", enable_partitioning=True)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        for i in range(5):
            sender.send_messages([ServiceBusMessage(f"m{i}-{k}", partition_key=f"k{k}")
                                  for k in range(3)])
        inbox = sender.entity.inbox
        assert _engines(inbox, 1) == [ENGINE] * 5

        def ids() -> list[tuple[Any, ...]]:
            return sorted(tuple(r) for r in inbox.rows().select(
                "send_id", "batch_index", "_metadata.row_id",
                "_metadata.row_commit_version").collect())
        before = ids()
        metrics = spark.sql(f"OPTIMIZE {inbox.sql_name}").first()["metrics"]
        assert metrics["numFilesRemoved"] > metrics["numFilesAdded"] > 0

        assert ids() == before
        optimized = _latest(inbox)
        sender.send_messages(ServiceBusMessage("late"))
        assert _engines(inbox, optimized + 1) == [ENGINE]
        late = inbox.rows().where("body = CAST('late' AS BINARY)").select(
            "_metadata.row_id", "_metadata.row_commit_version").first()
        # OPTIMIZE's new files took base row ids of their own (the rows keep theirs, in
        # the materialized column): the driver draws above the mark it committed
        assert late[0] == _mark(inbox, optimized) + 1 > max(r[2] for r in before)
        assert late[1] == optimized + 1


def test_the_inbox_checkpoint_interval_set_by_spark_is_honoured(
        spark: Any, admin: Any, namespace_root: str) -> None:
    admin.create_queue("q")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        inbox = sender.entity.inbox
        spark.sql(f"ALTER TABLE {inbox.sql_name} SET TBLPROPERTIES "
                  "('delta.checkpointInterval' = '3')")
        altered = _latest(inbox)
        for i in range(7):
            sender.send_messages(ServiceBusMessage(f"m{i}"))
        assert _engines(inbox, altered + 1) == [ENGINE] * 7
        checkpoints.written()  # a worker thread writes them beside the sends

        made = sorted(int(n[:20]) for n in os.listdir(_log_path(inbox))
                      if n.endswith(".checkpoint.parquet"))
        assert made == [v for v in range(altered + 1, _latest(inbox) + 1) if v % 3 == 0]
        rows = inbox.rows().select("_metadata.row_id").collect()
        assert sorted(r[0] for r in rows) == list(range(7))


def _age(log: Path, up_to: int, days: int = 40) -> None:
    then = time.time() - days * DAY
    for name in os.listdir(log):
        if name[:20].isdigit() and int(name[:20]) <= up_to:
            os.utime(log / name, (then, then))


def test_the_log_is_cleaned_when_only_the_driver_sends(
        spark: Any, admin: Any, namespace_root: str) -> None:
    """Driver sends checkpoint and then remove the log files older than the inbox's
    ``delta.logRetentionDuration`` (30 days; the files are made to look 40 days old):
    Spark reads every row with its row id and commit version from what is left, and a
    receiver whose cursor is behind the cleaned log still gets each message once, in
    order (S3.2, S5.1)."""
    admin.create_queue("q")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        sender = client.get_queue_sender("q")
        inbox = sender.entity.inbox
        for i in range(12):
            sender.send_messages(ServiceBusMessage(f"m{i:02d}"))
        checkpoints.written()  # the checkpoint thread's, at 10
        _age(_log_path(inbox), 10)
        for i in range(12, 20):
            sender.send_messages(ServiceBusMessage(f"m{i:02d}"))
        checkpoints.written()  # at 20, and the cleanup after it

        kept = sorted(int(n[:20]) for n in os.listdir(_log_path(inbox)) if n.endswith(".json"))
        assert kept == list(range(10, 21))
        rows = sorted(tuple(r) for r in inbox.rows().selectExpr(
            "CAST(body AS STRING)", "_metadata.row_id", "_metadata.row_commit_version"
        ).collect())
        assert rows == [(f"m{i:02d}", i, i + 1) for i in range(20)]
        assert _receive_all(client, "q") == [f"m{i:02d}" for i in range(20)]


def test_s5_1_a_ledger_delta_rs_refuses_is_committed_by_spark(
        spark: Any, admin: Any, namespace_root: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In-commit timestamps enabled on a ledger by Spark: delta-rs refuses the receive's
    rewrite ("Unsupported table features required"), which is not a conflict to retry
    until the budget is spent; the receive is committed by Spark's MERGE instead, and so
    is every later commit of this process to that ledger."""
    monkeypatch.setenv("SBQUEUE_DRIVER_COMMITS", "1")
    admin.create_queue("q", lock_duration="PT5M")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage("a"), ServiceBusMessage("b")])
        receiver = client.get_queue_receiver("q", max_wait_time=5)
        ledger = receiver._entity.ledger
        spark.sql(f"ALTER TABLE {ledger.sql_name} SET TBLPROPERTIES "
                  "('delta.enableInCommitTimestamps' = 'true')")
        altered = _latest(ledger)

        got = receiver.receive_messages(1)

        assert [str(m) for m in got] == ["a"]
        assert not driver.commits_enabled(ledger.path)
        assert _operations(ledger, altered + 1) == ["MERGE"]
        receiver.complete_message(got[0])
        assert _receive_all(client, "q") == ["b"]
