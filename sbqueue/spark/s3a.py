"""What a Spark session needs to read and write S3 namespaces (issue 44; decision 042).

Hadoop's S3A connector (``hadoop-aws``, the version of Spark's own Hadoop, with the AWS SDK
v2 modules it calls: not the 690 MB SDK bundle its pom names) for ``s3a://`` and ``s3://``
paths, and sbqueue's ``PutIfAbsentLogStore`` for both schemes, so Spark claims a table
version by a conditional write as the driver's commits and delta-rs do.

Settings come from the AWS environment the driver's reads already use: the endpoint and
region become ``fs.s3a.*`` confs; credentials are never copied into a conf (S3A's default
provider chain reads ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
``AWS_SESSION_TOKEN`` from the JVM's environment), so no conf dump or properties file holds
a secret.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sbqueue.spark.logstore import PUT_IF_ABSENT_CLASS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["S3A_PACKAGES", "aws_env_of", "has_s3a", "s3a_conf"]

# hadoop-aws matches the Hadoop of Spark 4.2's pip package (hadoop-client-api 3.5.0); the
# SDK version is the one its pom names (aws-java-sdk-v2.version).
S3A_PACKAGES = ("org.apache.hadoop:hadoop-aws:3.5.0",
                "software.amazon.awssdk:s3:2.35.4",
                "software.amazon.awssdk:s3-transfer-manager:2.35.4")
# The SDK bundle hadoop-aws's pom names, and an older Hadoop client that Delta's
# dependencies bring (3.4.2), which would shadow Spark's 3.5.0 classes.
_EXCLUDES = ("software.amazon.awssdk:bundle", "org.apache.hadoop:hadoop-client-api",
             "org.apache.hadoop:hadoop-client-runtime")
_S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def s3a_conf(packages: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark confs that add S3 to a session whose packages are ``packages``: the S3A
    jars, both schemes on S3A, the put-if-absent log store, and the endpoint and region of
    the AWS environment (``environ``, default ``os.environ``); no credential."""
    env = os.environ if environ is None else environ
    conf = {
        "spark.jars.packages": ",".join([p for p in packages.split(",") if p.strip()]
                                        + list(S3A_PACKAGES)),
        "spark.jars.excludes": ",".join(_EXCLUDES),
        "spark.hadoop.fs.s3.impl": _S3A,
        "spark.hadoop.fs.s3a.create.conditional.enabled": "true",
        "spark.delta.logStore.s3.impl": PUT_IF_ABSENT_CLASS,
        "spark.delta.logStore.s3a.impl": PUT_IF_ABSENT_CLASS,
    }
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"  # an S3-compatible server
        if endpoint.lower().startswith("http://"):
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    return conf


def has_s3a(spark: SparkSession) -> bool:
    """Whether ``spark`` writes S3 with the put-if-absent log store (a session
    configured elsewhere without it reads S3 at most; a Spark commit there could overwrite
    another writer's)."""
    return all(_conf(spark, f"spark.delta.logStore.{scheme}.impl") == PUT_IF_ABSENT_CLASS
               for scheme in ("s3", "s3a"))  # a conf Connect does not show: not ours


# A session's S3A settings and the AWS variables the driver's clients read for the same.
_AS_ENV = (("fs.s3a.endpoint", "AWS_ENDPOINT_URL"), ("fs.s3a.endpoint.region", "AWS_REGION"),
           ("fs.s3a.access.key", "AWS_ACCESS_KEY_ID"),
           ("fs.s3a.secret.key", "AWS_SECRET_ACCESS_KEY"),
           ("fs.s3a.session.token", "AWS_SESSION_TOKEN"))


def aws_env_of(spark: SparkSession) -> dict[str, str]:
    """The AWS variables that a session's ``spark.hadoop.fs.s3a.*`` confs set (a user who
    configured Spark only), so the driver's reads and commits reach the store Spark does.
    An endpoint without a scheme gets the one ``fs.s3a.connection.ssl.enabled`` implies."""
    found: dict[str, str] = {}
    for key, variable in _AS_ENV:
        value = _conf(spark, f"spark.hadoop.{key}")
        if value:
            found[variable] = value
    endpoint = found.get("AWS_ENDPOINT_URL")
    if endpoint and "://" not in endpoint:
        ssl = _conf(spark, "spark.hadoop.fs.s3a.connection.ssl.enabled").lower() != "false"
        found["AWS_ENDPOINT_URL"] = f"{'https' if ssl else 'http'}://{endpoint}"
    return found


def _conf(spark: SparkSession, key: str) -> str:
    try:
        return str(spark.conf.get(key, "") or "")
    except Exception:  # a conf Connect does not show
        return ""
