"""A class-data-sharing archive of the JVM classes an sbqueue process loads, for the JVMs
the tests start (decision 013).

A Spark driver with Delta loads some 20,000 classes; on two cores, loading and verifying
them is a third of a child JVM's start. Java 17 can write the classes a run loaded to an
archive at exit (``-XX:ArchiveClassesAtExit``) and map them at the next start
(``-XX:SharedArchiveFile``): measured here, a child that creates a queue and sends,
receives and completes one message fell from 24 s to 15 s.

The archive is built once per machine (70-110 s here, by a spark-submit of this file, which
exercises the common paths), keyed by the Java, PySpark and Delta versions, and kept in
sbqueue's cache folder. A JVM whose class path does not match ignores it; its warnings are
turned off.

    python tests/jvm_archive.py --build   # what the tests call when the archive is missing
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _key() -> str:
    import pyspark

    from sbqueue.spark import local_conf

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    jars = sorted(os.listdir(Path(pyspark.__file__).parent / "jars"))
    parts = [java, pyspark.__version__, local_conf()["spark.jars.packages"], *jars]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path() -> Path:
    from sbqueue.spark.paths import cache_dir

    return cache_dir() / "cds" / f"spark-{_key()}.jsa"


def options(archive: Path | None) -> str:
    """The JVM options that map ``archive`` (none when there is no archive)."""
    return "" if archive is None else f"-XX:SharedArchiveFile={archive} {QUIET}"


def ensure_archive() -> Path | None:
    """The archive, built first if it is missing; None if it could not be built (the
    tests then run without it, only slower)."""
    target = archive_path()
    if target.exists():
        return target
    from sbqueue.spark import submit_properties
    from sbqueue.spark.logstore import _pyspark_home

    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_suffix(f".{os.getpid()}.tmp")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "SPARK_SUBMIT_OPTS": f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={staged}"}
    # spark-submit runs the JVM as the process it waits for: the archive is written when
    # it returns. (Its warnings, one per class it cannot keep, stay on: Java 17 aborts at
    # exit when they are turned off while it writes.)
    for _ in range(2):  # a JVM that aborts while writing is tried once more
        try:
            run = subprocess.run(
                [str(_pyspark_home() / "bin" / "spark-submit"), "--master", "local[2]",
                 "--properties-file", str(submit_properties()), __file__, "--train"],
                capture_output=True, text=True, timeout=400, env=env,
                stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            staged.unlink(missing_ok=True)
            sys.stderr.write("jvm_archive: not built (over 400 s)\n")
            return None
        if run.returncode == 0 and staged.exists():
            os.replace(staged, target)
            return target
        staged.unlink(missing_ok=True)
        sys.stderr.write(f"jvm_archive: not built (exit {run.returncode}): "
                         f"{run.stderr[-500:]}\n")
    return None


def _train() -> None:
    """What most tests' JVMs do: admin, client send, receive, settle, a DataFrame send and
    drain, a topic with a filter, the SQL view."""
    from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
    from sbqueue.management import ServiceBusAdministrationClient, SqlRuleFilter

    root = tempfile.mkdtemp(prefix="sbqueue-cds-")
    namespace = Namespace(root)
    admin = ServiceBusAdministrationClient(root, spark=namespace.spark)
    admin.create_queue("q", enable_partitioning=True)
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    admin.create_rule("t", "s", "odd", filter=SqlRuleFilter("n % 2 = 1"))
    with ServiceBusClient(root, spark=namespace.spark) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(str(i), partition_key=str(i)) for i in range(4)])
        client.get_topic_sender("t").send_messages(
            ServiceBusMessage("x", application_properties={"n": 1}))
        with client.get_queue_receiver("q", max_wait_time=5) as receiver:
            got = receiver.receive_messages(4)
            receiver.complete_message(got[0])
            receiver.abandon_message(got[1])
            receiver.dead_letter_message(got[2], reason="train")
        with client.get_subscription_receiver("t", "s", max_wait_time=5) as receiver:
            for message in receiver.receive_messages(1):
                receiver.complete_message(message)
    entity = namespace.entity("q")
    entity.send_dataframe(namespace.spark.createDataFrame([("a",), ("b",)], "body string"))
    frame = entity.receive_dataframe(10)
    entity.complete_dataframe(frame)
    entity.messages().count()
    entity.counts()
    _record_jars(namespace.spark)
    # Spark's threads stopped before the JVM exits and writes the archive: with them
    # running, Java 17 sometimes aborts while it writes (exit 134)
    namespace.spark.stop()


def _record_jars(spark: object) -> None:
    """Record the jars this spark-submit's Ivy resolved, as a local session records its own
    (decision 025): the full suite's workers then start their sessions without Ivy, never
    two resolutions at once in the one cache."""
    from sbqueue.spark import local_conf
    from sbqueue.spark.jars import PACKAGES, record_of, record_resolved

    conf = local_conf()
    record = record_of(conf)
    if record is not None:
        started = spark.sparkContext.getConf()  # type: ignore[attr-defined]
        record_resolved(record, conf[PACKAGES], conf.get("spark.jars.ivy", ""),
                        started.get("spark.repl.local.jars", "") or "")


if __name__ == "__main__":
    if sys.argv[1:] == ["--train"]:
        _train()
    elif sys.argv[1:] == ["--build"]:
        print(ensure_archive())
    else:
        sys.exit(__doc__)
