"""One way to get a SparkSession with Delta: reuse the active one, or build a tuned local one.

On spark-submit or Databricks the caller's session (and its storage setup) wins. A local
session gets the defaults of ``conf/spark-defaults.conf``, the Delta jars resolved by
Spark's Ivy into a stable cache (so only the first start downloads), and the cross-process
safe log store of :mod:`sbqueue.spark.logstore` for ``file:`` paths (DESIGN fact 4).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sbqueue.exceptions import SparkSetupError
from sbqueue.spark.logstore import LOGSTORE_CLASS, ensure_logstore_jar
from sbqueue.spark.paths import cache_dir, conf_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["get_session", "local_conf", "stop_session"]

_lock = threading.Lock()


def local_conf() -> dict[str, str]:
    """The Spark properties of ``conf/spark-defaults.conf`` plus the machine-specific paths."""
    conf: dict[str, str] = {}
    for raw in (conf_dir() / "spark-defaults.conf").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        conf[key] = value.strip()
    conf["spark.jars.ivy"] = str(cache_dir() / "ivy")
    conf["spark.jars.ivySettings"] = str(conf_dir() / "ivysettings.xml")
    # The in-memory catalog holds only views; keep its folder out of the user's directory.
    conf["spark.sql.warehouse.dir"] = str(cache_dir() / "warehouse")
    return conf


def _check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java") is None:
        raise SparkSetupError(
            "Java was not found: Spark needs a Java 17 runtime. Install one (for example "
            "'apt-get install openjdk-17-jdk-headless') or set JAVA_HOME, then retry."
        )


def get_session(
    app_name: str = "sbqueue",
    master: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return the active SparkSession, or build a local one with Delta configured.

    ``extra_conf`` overrides the defaults of a new local session (an empty value removes
    the key); it is ignored when a session is already active.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        _check_java()
        conf = local_conf()
        conf["spark.jars"] = str(ensure_logstore_jar(conf))
        conf["spark.delta.logStore.file.impl"] = LOGSTORE_CLASS
        for key, value in (extra_conf or {}).items():
            if value:
                conf[key] = value
            else:
                conf.pop(key, None)
        builder = SparkSession.builder.appName(app_name).master(
            master or os.environ.get("SBQUEUE_SPARK_MASTER", "local[2]")
        )
        for key, value in conf.items():
            builder = builder.config(key, value)
        try:
            session = builder.getOrCreate()
        except Exception as exc:  # the JVM died before answering: say why, once
            raise SparkSetupError(
                f"Spark could not start ({exc.__class__.__name__}: {str(exc)[:300]}). "
                "Check that Java 17 is installed and that Maven Central is reachable for "
                f"the first download of {conf['spark.jars.packages']} into "
                f"{conf['spark.jars.ivy']}."
            ) from exc
        session.sparkContext.setLogLevel("ERROR")
        return session


def stop_session() -> None:
    """Stop the active session, if any (tests and the CLI call this on exit)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
