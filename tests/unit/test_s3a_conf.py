"""Decision 042: what a session adds for an S3 namespace (no Spark needed here)."""

from __future__ import annotations

from sbqueue.location import is_s3
from sbqueue.spark.logstore import PUT_IF_ABSENT_CLASS
from sbqueue.spark.s3a import S3A_PACKAGES, s3a_conf
from sbqueue.spark.session import store_conf

_ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY": "very-secret",
        "AWS_SESSION_TOKEN": "token-secret"}


def test_both_schemes_are_s3_and_nothing_else_is() -> None:
    assert is_s3("s3://b/p") and is_s3("S3A://b/p")
    assert not any(is_s3(r) for r in ("/tmp/s3", "abfss://c@a/p", "s3", "file:///s3a"))


def test_the_conf_adds_s3a_and_the_put_if_absent_store_and_no_secret() -> None:
    conf = s3a_conf("io.delta:delta-spark_4.2_2.13:4.4.0", _ENV)
    packages = conf["spark.jars.packages"].split(",")
    assert packages[0].startswith("io.delta:") and set(S3A_PACKAGES) <= set(packages)
    assert "software.amazon.awssdk:bundle" in conf["spark.jars.excludes"]
    assert conf["spark.hadoop.fs.s3.impl"].endswith("S3AFileSystem")
    assert conf["spark.delta.logStore.s3.impl"] == PUT_IF_ABSENT_CLASS
    assert conf["spark.delta.logStore.s3a.impl"] == PUT_IF_ABSENT_CLASS
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    text = repr(conf)
    assert not any(secret in text for secret in ("AKIAEXAMPLEKEY", "very-secret", "token-secret"))


def test_aws_s_own_endpoint_needs_no_endpoint_conf() -> None:
    conf = s3a_conf("p", {"AWS_DEFAULT_REGION": "us-west-2"})
    assert "spark.hadoop.fs.s3a.endpoint" not in conf
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "us-west-2"


def test_only_an_s3_namespace_adds_confs() -> None:
    assert store_conf(None) == {} and store_conf("/tmp/ns") == {}
    assert store_conf("s3a://b/ns")["spark.delta.logStore.s3a.impl"] == PUT_IF_ABSENT_CLASS
