"""Issue 22 point 4: an entity as it stood at a past version or time (``Entity.as_of``),
and ``sbqueue replay`` sending those messages to another entity."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from chispa import assert_df_equality
from click.testing import CliRunner

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.cli import main
from sbqueue.engine.reads.replay import REPLAYED_FROM
from sbqueue.exceptions import InvalidOperationError

pytestmark = pytest.mark.spark

SHOWN = ["sequence_number", "message_id", "state", "sub_queue"]


def _send(client: ServiceBusClient, queue: str, ids: list[str]) -> None:
    client.get_queue_sender(queue).send_messages(
        [ServiceBusMessage(i, message_id=i, application_properties={"n": k})
         for k, i in enumerate(ids)])


def _ids(frame: object) -> list[str]:
    return sorted(r["message_id"] for r in frame.collect())  # type: ignore[attr-defined]


@pytest.mark.slow
def test_as_of_shows_each_version_and_time_as_the_view_did(admin, spark, namespace_root
                                                           ) -> None:
    admin.create_queue("src")
    entity = admin.namespace.entity("src")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        _send(client, "src", ["a", "b", "c"])
        first = entity.version()
        with client.get_queue_receiver("src", max_wait_time=5) as receiver:
            got = {str(m): m for m in receiver.receive_messages(3)}
            receiver.complete_message(got["a"])
            receiver.dead_letter_message(got["b"], reason="bad")
        time.sleep(1.1)  # commit times are the log's: a time between two commits
        between = datetime.now(timezone.utc)
        time.sleep(1.1)
        _send(client, "src", ["d"])
    then = entity.as_of(first)
    assert _ids(then) == ["a", "b", "c"]  # as sent: nothing received yet
    assert {r["state"] for r in then.collect()} == {"Active"}
    assert _ids(entity.as_of(between)) == ["b", "c"]  # a completed, b dead-lettered, no d
    assert_df_equality(entity.as_of(entity.version()).select(*SHOWN),
                       entity.messages().select(*SHOWN), ignore_row_order=True,
                       ignore_nullable=True)


def test_replay_sends_what_the_entity_held_with_its_origin(admin, spark, namespace_root
                                                            ) -> None:
    admin.create_queue("orders")
    admin.create_queue("again")
    entity = admin.namespace.entity("orders")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        _send(client, "orders", ["o1", "o2", "o3"])
        version = entity.version()
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            for message in receiver.receive_messages(3):
                receiver.complete_message(message)  # gone now, still there as of version
    result = entity.replay(version, "again", where="message_id <> 'o2'")
    assert result.count == 2
    rows = {r["message_id"]: r for r in admin.namespace.entity("again").messages().collect()}
    assert sorted(rows) == ["o1", "o3"]
    props = {m: json.loads(r["application_properties"].toJson()) for m, r in rows.items()}
    assert props == {"o1": {"n": 0, REPLAYED_FROM: f"orders@{version}"},
                     "o3": {"n": 2, REPLAYED_FROM: f"orders@{version}"}}
    assert {r["state"] for r in rows.values()} == {"Active"}
    assert admin.namespace.entity("orders").counts()["active"] == 0  # the source unchanged


def test_bad_versions_times_and_predicates_are_refused_and_send_nothing(
        admin, spark, namespace_root) -> None:
    admin.create_queue("src")
    admin.create_queue("dst")
    entity = admin.namespace.entity("src")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        _send(client, "src", ["a"])
    latest = entity.version()
    with pytest.raises(InvalidOperationError, match=f"no version 99.*0 to {latest}"):
        entity.as_of(99)
    with pytest.raises(InvalidOperationError, match="did not exist at 2001"):
        entity.as_of(datetime(2001, 1, 1, tzinfo=timezone.utc))
    with pytest.raises(InvalidOperationError, match="no_such_column"):
        entity.replay(latest, "dst", where="no_such_column = 1")
    with pytest.raises(InvalidOperationError, match="as of 'x'"):
        entity.as_of("x")  # type: ignore[arg-type]
    assert admin.namespace.entity("dst").counts()["active"] == 0


@pytest.mark.slow
def test_a_vacuumed_version_names_the_oldest_still_readable(admin, spark, namespace_root
                                                           ) -> None:
    admin.create_queue("src", lock_duration=timedelta(seconds=30))
    entity = admin.namespace.entity("src")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        _send(client, "src", ["a", "b"])
        with client.get_queue_receiver("src", max_wait_time=5) as receiver:
            [first] = receiver.receive_messages(1)  # the ledger's first file
            time.sleep(1.1)
            _send(client, "src", ["c"])
            lost = entity.version()  # needs that file, which the next receive replaces
            time.sleep(1.1)
            for message in [first, *receiver.receive_messages(2)]:
                receiver.complete_message(message)
        time.sleep(1.1)
        _send(client, "src", ["d"])
    kept = entity.version()
    assert _ids(entity.as_of(lost)) == ["a", "b", "c"]
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        entity.ledger.vacuum(0)  # what maintenance does after its retention
    finally:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    with pytest.raises(InvalidOperationError,
                       match=f"version {lost} .* oldest version still readable is {kept}"):
        entity.as_of(lost)
    assert _ids(entity.as_of(kept)) == ["d"]  # a, b and c completed by then


@pytest.mark.slow
def test_the_cli_replays_a_version_or_a_time(admin, spark, namespace_root) -> None:
    admin.create_queue("src")
    admin.create_queue("dst")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        _send(client, "src", ["a", "b"])
    version = admin.namespace.entity("src").version()
    runner = CliRunner()
    ns = ["--namespace", namespace_root]
    done = runner.invoke(main, ["replay", *ns, "src", "--as-of", str(version), "--to", "dst",
                                "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output.strip().splitlines()[-1])["sent"] == 2
    now = datetime.now(timezone.utc).isoformat()
    again = runner.invoke(main, ["replay", *ns, "src", "--as-of", now, "--to", "dst",
                                 "--where", "message_id = 'a'", "--json"])
    assert json.loads(again.output.strip().splitlines()[-1])["sent"] == 1, again.output
    assert _ids(admin.namespace.entity("dst").messages()) == ["a", "a", "b"]
    bad = runner.invoke(main, ["replay", *ns, "src", "--as-of", "yesterday", "--to", "dst"])
    assert bad.exit_code == 2 and "'yesterday' is neither a version" in bad.output
