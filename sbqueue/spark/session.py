"""One way to get a SparkSession with Delta: reuse what is configured, or build a local one.

Under spark-submit, Spark Connect or Databricks the caller's session (master, confs,
storage setup) is used as is. A local
session gets the defaults of ``conf/spark-defaults.conf``, the Delta jars resolved by
Spark's Ivy into a stable cache (so only the first start downloads), and the cross-process
safe log store of :mod:`sbqueue.spark.logstore` for ``file:`` paths (DESIGN fact 4).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from sbqueue.exceptions import ServiceBusCommunicationError, SparkSetupError
from sbqueue.location import is_s3
from sbqueue.spark.jars import PACKAGES, record_of, record_resolved, use_resolved
from sbqueue.spark.logstore import LOGSTORE_CLASS, ensure_logstore_jar
from sbqueue.spark.paths import cache_dir, conf_dir
from sbqueue.spark.s3a import s3a_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "configured_elsewhere",
    "get_session",
    "local_conf",
    "release_aborted_writes",
    "speaks_delta_errors",
    "stop_session",
    "store_conf",
    "submit_properties",
]

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
    # Retried conflicts leave no Java trace on the user's terminal (log4j2.properties).
    conf["spark.driver.extraJavaOptions"] = (
        f"-Dlog4j2.configurationFile={(conf_dir() / 'log4j2.properties').as_uri()}")
    return conf


def store_conf(root: str | None) -> dict[str, str]:
    """The confs a local session adds for a namespace at ``root``: S3A and the put-if-absent
    log store for an S3 prefix (``spark.s3a``), else none."""
    if root is None or not is_s3(root):
        return {}
    return s3a_conf(local_conf()[PACKAGES])


def submit_properties(store: str = "local") -> Path:
    """A ``--properties-file`` for spark-submit on this machine: the package defaults, the
    Ivy cache and settings, and the cross-process safe log store for local folders; with
    ``store="s3"`` also S3A and the put-if-absent log store (no credential: S3A reads
    the AWS environment).

    Written to the cache folder (its paths are machine-specific) and rewritten each call.
    """
    _check_java()
    conf = local_conf()
    conf["spark.jars"] = str(ensure_logstore_jar(conf))
    conf["spark.delta.logStore.file.impl"] = LOGSTORE_CLASS
    if store == "s3":
        conf.update(s3a_conf(conf[PACKAGES]))
    name = "spark-submit.conf" if store == "local" else f"spark-submit-{store}.conf"
    target = cache_dir() / name
    staged = target.with_suffix(f".{os.getpid()}.tmp")
    staged.write_text("".join(f"{key} {value}\n" for key, value in sorted(conf.items())))
    os.replace(staged, target)
    return target


def _check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java") is None:
        raise SparkSetupError(
            "Java was not found: Spark needs a Java 17 runtime. Install one (for example "
            "'apt-get install openjdk-17-jdk-headless') or set JAVA_HOME, then retry."
        )


def configured_elsewhere() -> str | None:
    """Why the session must come from the environment rather than be built here, or None.

    spark-submit and the pyspark shell start the JVM first and hand Python its gateway
    (``PYSPARK_GATEWAY_PORT``); Spark Connect clients name a remote (``SPARK_REMOTE``);
    Databricks sets ``DATABRICKS_RUNTIME_VERSION``. Their master and confs win.
    """
    for variable, what in (("PYSPARK_GATEWAY_PORT", "spark-submit"),
                           ("SPARK_REMOTE", "Spark Connect"),
                           ("DATABRICKS_RUNTIME_VERSION", "Databricks")):
        if os.environ.get(variable):
            return what
    return None


def _require_delta(session: SparkSession, origin: str) -> None:
    """A session configured elsewhere must already have Delta: say what to add if not."""
    if origin in ("Databricks", "Spark Connect"):
        return  # Delta is built in there, and Connect does not show every static conf
    extensions = session.conf.get("spark.sql.extensions", "") or ""
    if "DeltaSparkSessionExtension" not in extensions:
        raise SparkSetupError(
            f"The Spark session from {origin} has no Delta Lake: start it with "
            "--properties-file \"$(sbqueue spark-conf)\" (or --packages "
            "io.delta:delta-spark_4.2_2.13:4.4.0 --conf "
            "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension --conf "
            "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog)."
        )


def _reach(remote: str, seconds: float = 5.0) -> None:
    """A Spark Connect server that cannot be reached is the SDK's communication error,
    naming the remote, at once: the Connect client itself retries for minutes before its
    gRPC error."""
    parsed = urlparse(remote.split(";", 1)[0].replace("sc://", "http://", 1))
    host, port = parsed.hostname or "localhost", parsed.port or 15002
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except OSError as exc:
        raise ServiceBusCommunicationError(
            f"the Spark Connect server {remote!r} ({host}:{port}) cannot be reached: "
            f"{exc.strerror or exc}; start it, or unset SPARK_REMOTE for a local session"
        ) from None


def get_session(
    app_name: str = "sbqueue",
    master: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """The session to use: the active one; else the one spark-submit, Spark Connect or
    Databricks configured, taken as is; else a new local one with Delta and sbqueue's
    defaults (the only case where ``master`` and ``extra_conf`` apply; an empty value in
    ``extra_conf`` removes a default).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        origin = configured_elsewhere()
        if origin is not None:
            if origin == "Spark Connect":
                _reach(os.environ.get("SPARK_REMOTE", ""))
            session = SparkSession.builder.appName(app_name).getOrCreate()
            _require_delta(session, origin)
            return session
        return _build_local(app_name, master, extra_conf)


def _build_local(app_name: str, master: str | None,
                 extra_conf: Mapping[str, str] | None) -> SparkSession:
    from pyspark.sql import SparkSession

    _check_java()
    conf = local_conf()
    conf["spark.jars"] = str(ensure_logstore_jar(conf))
    conf["spark.delta.logStore.file.impl"] = LOGSTORE_CLASS
    for key, value in (extra_conf or {}).items():
        if value and key.endswith("extraJavaOptions") and conf.get(key):
            conf[key] = f"{conf[key]} {value}"  # the user's options, after sbqueue's
        elif value:
            conf[key] = value
        else:
            conf.pop(key, None)
    _workers_use_this_python(conf)
    delta, record = conf.get(PACKAGES, ""), record_of(conf)
    if use_resolved(conf) or os.environ.get("PYSPARK_SUBMIT_ARGS"):
        record = None  # Ivy skipped, or the user's own submit arguments: nothing to learn
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
            f"the first download of {delta} into "
            f"{conf['spark.jars.ivy']}."
        ) from exc
    session.sparkContext.setLogLevel("ERROR")
    if record is not None:
        started = session.sparkContext.getConf()
        record_resolved(record, delta, conf.get("spark.jars.ivy", ""),
                        started.get("spark.repl.local.jars", "") or "")
    return session


# What a user sets to choose the Python of Spark's workers: left exactly as given.
PYTHON_CHOICES = ("spark.pyspark.python", "spark.pyspark.driver.python")
PYTHON_VARIABLES = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


def _workers_use_this_python(conf: dict[str, str]) -> None:
    """Make a local session's Python workers run this interpreter, unless the user chose one.

    A local PySpark starts its workers with ``$PYSPARK_PYTHON``, else whatever ``python3``
    is first on ``PATH``: for a venv's program run by its path (pipx, cron, an IDE, a
    Docker ``CMD``) that is another interpreter, without sbqueue, and every UDF fails with
    ``ModuleNotFoundError`` in the workers. ``sys.executable`` is the one that has it.
    """
    if any(conf.get(k) for k in PYTHON_CHOICES) or any(os.environ.get(v)
                                                       for v in PYTHON_VARIABLES):
        return
    os.environ["PYSPARK_PYTHON"] = sys.executable  # what PySpark's SparkContext reads
    conf["spark.pyspark.python"] = sys.executable  # and what the session shows


def release_aborted_writes() -> None:
    """Ask this process's local JVM to collect garbage. A Spark write that a full disk
    aborted leaves its Parquet file open (the abort cannot close a stream whose flush
    failed), holding the file's space and keeping the file system busy until the stream is
    collected. A no-op without a local JVM (Spark Connect, no session)."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    jvm = getattr(getattr(session, "_jvm", None), "java", None) if session else None
    try:
        if jvm is not None:
            jvm.lang.System.gc()
    except Exception:  # best effort: the storage failure itself is what the caller sees
        return


def stop_session() -> None:
    """Stop the active session, if any (tests and the CLI call this on exit)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def is_connect(session: object) -> bool:
    """Whether ``session`` is a Spark Connect client's (its classes live in
    ``pyspark.sql.connect``): told from the session itself, not from the environment."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def speaks_delta_errors(spark: object) -> None:
    """Over Spark Connect, Delta's conflicts reach Python as ``DELTA_CONFLICTS`` only once
    ``delta.connect`` registered them (an import of a second, which classic sessions skip)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        import delta.connect  # noqa: F401
