"""Issue 5 point 8: the small defects, each with the rule it breaks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pyspark.sql import functions as F

from sbqueue.engine import Namespace
from sbqueue.exceptions import InvalidOperationError


@pytest.mark.spark
def test_s2_3_typed_application_properties_round_trip(admin, spark, namespace_root) -> None:
    """Natural typed values in, typed values out (an int stays an int), readable in SQL as
    ``application_properties:priority::int``; no internal encoding visible."""
    admin.create_queue("typed")
    queue = Namespace(namespace_root, spark).entity("typed")
    df = spark.range(3).select(
        F.col("id").cast("string").alias("body"),
        F.struct((F.col("id") + 40).alias("priority"), (F.col("id") == 1).alias("vip"),
                 F.lit(1.5).alias("ratio"), F.lit("eu").alias("region"),
                 F.expr("INTERVAL '90' SECOND").alias("wait"),
                 ).alias("application_properties"))
    queue.send_dataframe(df)
    view = queue.namespace.sql_name("typed")
    rows = spark.sql(f"SELECT application_properties:priority::int AS p, "
                     f"application_properties:region::string AS r FROM {view} ORDER BY p"
                     ).collect()
    assert [(r.p, r.r) for r in rows] == [(40, "eu"), (41, "eu"), (42, "eu")]
    got = queue.receive_dataframe(10).orderBy("sequence_number").collect()
    props = got[1].application_properties.toPython()
    assert props["priority"] == 41 and isinstance(props["priority"], int)
    assert props["vip"] is True and props["ratio"] == 1.5 and props["wait"] == "PT90.0S"


@pytest.mark.spark
def test_s2_3_s2_1_bad_types_are_sbqueue_errors(admin, spark, namespace_root) -> None:
    admin.create_queue("bad")
    queue = Namespace(namespace_root, spark).entity("bad")
    with pytest.raises(InvalidOperationError, match=r"'tags'.*array<string>.*S2\.3"):
        queue.send_dataframe(spark.range(1).selectExpr(
            "'x' AS body", "named_struct('tags', array('a')) AS application_properties"))
    with pytest.raises(InvalidOperationError, match=r"body has type bigint.*S2\.1"):
        queue.send_dataframe(spark.range(1).selectExpr("id AS body"))
    with pytest.raises(InvalidOperationError, match=r"ARRAY.*S2\.3"):  # checked per row
        queue.send_dataframe(spark.range(1).selectExpr(
            "'x' AS body", "parse_json('{\"a\": [1]}') AS application_properties"))
    assert queue.counts()["total"] == 0


@pytest.mark.spark
def test_s7_2_nothing_can_be_sent_to_a_dead_letter_queue(admin, spark, namespace_root) -> None:
    admin.create_queue("q")
    dlq = Namespace(namespace_root, spark).entity("q/$DeadLetterQueue")
    with pytest.raises(InvalidOperationError, match=r"S7\.2"):
        dlq.send_dataframe(spark.range(1).selectExpr("'x' AS body"))
    assert Namespace(namespace_root, spark).entity("q").counts()["total"] == 0


@pytest.mark.spark
def test_s1_3_update_cannot_change_the_partition_count(admin, spark) -> None:
    props = admin.create_queue("fixed", enable_partitioning=True)
    props.partition_count = 4
    with pytest.raises(InvalidOperationError, match=r"S1\.3"):
        admin.update_queue(props)
    with pytest.raises(InvalidOperationError, match=r"S1\.3"):
        admin.update_queue({"name": "fixed", "partition_count": 2})
    assert admin.get_queue("fixed").partition_count == 16


@pytest.mark.spark
def test_s1_1_an_unreachable_storage_scheme_is_one_clear_error(spark) -> None:
    """The SDK's ServiceBusConnectionError (issue 20 point 2): the storage cannot be
    reached from this session."""
    from sbqueue.exceptions import ServiceBusConnectionError

    with pytest.raises(ServiceBusConnectionError, match=r"no file system for gs.*S1\.1"):
        Namespace("gs://bucket/namespace", spark)  # S3: test_s3.py (the local executor)


def test_s6_7_max_delivery_count_is_capped_at_int32() -> None:
    from sbqueue.core.properties import QueueProperties, Sku, build_properties

    with pytest.raises(InvalidOperationError, match=r"2147483647.*S6\.7"):
        build_properties(QueueProperties, "q", {"max_delivery_count": 2**63},
                         sku=Sku.STANDARD, messaging_partitions=1)
    ok = build_properties(QueueProperties, "q", {"max_delivery_count": 2**31 - 1},
                          sku=Sku.STANDARD, messaging_partitions=1)
    assert ok.max_delivery_count == 2**31 - 1


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sbqueue.cli", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_a_refused_create_leaves_no_namespace_behind(tmp_path) -> None:
    root = tmp_path / "never"
    result = _cli("queue", "create", "--namespace", str(root), "q", "lock_duration=PT1H")
    assert result.returncode == 1 and "lock_duration" in result.stdout
    assert not root.exists()


@pytest.mark.slow
def test_a_namespace_that_is_a_file_is_one_line(tmp_path) -> None:
    """One line however long the path (the terminal is 80 columns wide here): the user
    copies the path from it whole."""
    afile = tmp_path / ("a-folder-with-a-long-name-" * 4) / "file[1]"
    afile.parent.mkdir()
    afile.write_text("x")
    result = _cli("queue", "create", "--namespace", str(afile), "q")
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    [line] = result.stdout.splitlines()
    assert str(afile) in line and "is a file" in line
