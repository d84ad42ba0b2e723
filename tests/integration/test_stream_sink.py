"""Issue 22 point 1: ``writeStream.format("sbqueue")`` sends each micro-batch to a queue
or a topic once; a batch Spark replays after a crash (its sink commit landed, Spark's own commit
record did not) sends nothing twice (docs/decisions/024)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from stream_files import write_files

from sbqueue import Namespace
from sbqueue.datasource import register
from sbqueue.management import SqlRuleAction, SqlRuleFilter

pytestmark = [pytest.mark.spark, pytest.mark.local_executor]

SCHEMA = "body string, message_id string, session_id string, " \
         "application_properties map<string,string>"


def run_stream(spark, source: Path, root: str, entity: str, checkpoint: Path) -> None:
    register(spark)
    query = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
             .writeStream.format("sbqueue").option("namespace", root).option("entity", entity)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()


def forget_last_commit(checkpoint: Path) -> int:
    """Spark's commit record of the last batch removed: as if the driver died after the
    sink committed it and before Spark recorded that."""
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last


def in_queue(spark, admin, queue: str):
    view = admin.namespace.entity(queue).messages()
    return view.selectExpr("message_id", "CAST(body AS STRING) AS body",
                           "application_properties:file::string AS file")


def expected(spark, ids: list[str]):
    rows = [(i, f"body {i[1:]}", i[1:].split("-")[0]) for i in ids]
    return spark.createDataFrame(rows, "message_id string, body string, file string")


@pytest.mark.slow
def test_each_row_is_sent_once_even_when_a_batch_is_replayed(admin, spark, namespace_root,
                                                              tmp_path) -> None:
    admin.create_queue("orders")
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    ids = write_files(source, 0, 3)
    run_stream(spark, source, namespace_root, "orders", checkpoint)
    assert forget_last_commit(checkpoint) == 2  # one file per batch
    run_stream(spark, source, namespace_root, "orders", checkpoint)  # batch 2 again
    ids += write_files(source, 3, 1)  # and the query goes on with new rows
    run_stream(spark, source, namespace_root, "orders", checkpoint)
    assert_df_equality(in_queue(spark, admin, "orders"), expected(spark, ids),
                       ignore_row_order=True, ignore_nullable=True)
    counts = admin.namespace.entity("orders").counts()
    assert counts["active"] == 16


def test_a_new_checkpoint_is_a_new_query(admin, spark, namespace_root, tmp_path) -> None:
    """Batch 0 of another query (another checkpoint) is not taken for the first's."""
    admin.create_queue("orders")
    source = tmp_path / "in"
    write_files(source, 0, 1)
    run_stream(spark, source, namespace_root, "orders", tmp_path / "one")
    run_stream(spark, source, namespace_root, "orders", tmp_path / "two")
    assert admin.namespace.entity("orders").counts()["active"] == 8


def test_bad_columns_and_targets_are_refused_naming_them(admin, spark, namespace_root,
                                                         tmp_path) -> None:
    admin.create_queue("orders")
    admin.create_topic("news")
    register(spark)
    source = tmp_path / "in"
    write_files(source, 0, 1)
    frame = spark.readStream.schema(SCHEMA).json(str(source))

    def start(df, entity: str, checkpoint: str):
        query = (df.writeStream.format("sbqueue").option("namespace", namespace_root)
                 .option("entity", entity).option("checkpointLocation",
                                                  str(tmp_path / checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()

    with pytest.raises(Exception, match=r"unknown message column\(s\) extra.*S2\.1"):
        start(frame.selectExpr("body", "1 AS extra"), "orders", "c1")
    with pytest.raises(Exception, match=r"'nowhere'"):
        start(frame, "nowhere", "c3")
    assert admin.namespace.entity("orders").counts()["total"] == 0


def _topic_with_rules(admin, name: str) -> None:
    admin.create_topic(name, enable_partitioning=True)
    admin.create_subscription(name, "all")
    admin.create_subscription(name, "red")
    admin.delete_rule(name, "red", "$Default")
    admin.create_rule(name, "red", "red", filter=SqlRuleFilter("color = 'red' AND n > 1"))
    admin.create_subscription(name, "tagged")
    admin.delete_rule(name, "tagged", "$Default")
    admin.create_rule(name, "tagged", "tag", filter=SqlRuleFilter("n % 2 = 0"),
                      action=SqlRuleAction("SET tag = 'even'; SET sys.Label = color; "
                                           "REMOVE n"))
    admin.create_subscription(name, "chats", requires_session=True)


def _subscription_view(admin, topic: str, sub: str):
    view = admin.namespace.entity(f"{topic}/Subscriptions/{sub}").messages()
    return view.select("message_id", "session_id", "subject", "sub_queue", "state",
                       "dead_letter_reason", F.to_json("application_properties").alias("p"))


@pytest.mark.slow
def test_a_topic_gets_what_a_dataframe_send_gives_it(admin, spark, namespace_root,
                                                     tmp_path) -> None:
    """S15.2-S15.6, S10.1: each subscription of a topic streamed into holds what it holds
    when the same rows are sent with ``Topic.send_dataframe``, rule copies included."""
    for topic in ("streamed", "sent"):
        _topic_with_rules(admin, topic)
    source = tmp_path / "in"
    source.mkdir()
    rows = [{"body": f"b{i}", "message_id": f"m{i}", "session_id": "s" if i % 3 else None,
             "application_properties": {"color": ["red", "blue"][i % 2], "n": i}}
            for i in range(8)]
    (source / "rows.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    schema = ("body string, message_id string, session_id string, "
              "application_properties struct<color:string,n:bigint>")
    register(spark)
    (spark.readStream.schema(schema).json(str(source)).writeStream.format("sbqueue")
     .option("namespace", namespace_root).option("entity", "streamed")
     .option("checkpointLocation", str(tmp_path / "checkpoint"))
     .trigger(availableNow=True).start().awaitTermination())
    Namespace(namespace_root, spark).topic("sent").send_dataframe(
        spark.read.schema(schema).json(str(source)))
    for sub in ("all", "red", "tagged", "chats"):
        assert_df_equality(_subscription_view(admin, "streamed", sub),
                           _subscription_view(admin, "sent", sub),
                           ignore_row_order=True, ignore_nullable=True)
    tagged = _subscription_view(admin, "streamed", "tagged").collect()
    assert {r.subject for r in tagged} == {"red"}  # SET sys.Label = color (even n: red)
    assert len(tagged) == 4 and all('"RuleName":"tag"' in r.p and '"tag":"even"' in r.p
                                    and '"n"' not in r.p for r in tagged)
