"""Delta operations with the properties the engine relies on (DESIGN facts 2, 3, 6).

- ``append``: a blind append; never conflicts; idempotent when given a (app id, version).
- ``read_appended``: the rows appended after a version, via the change data feed (or the
  snapshot, once the log no longer holds that version), with the commit version of each
  row (commit order without a conflicting read).
- ``Table``: one Delta table by its path, with every operation above, the guarded MERGE
  (``store.guarded``: a change set applied only if what it was decided from still stands)
  and the maintenance operations (history, delete by partition, compaction, vacuum). The
  engine's gateways (``engine.ledger``, ``engine.inbox``) are the only modules that hold
  one (issue 18).

Every operation is Spark SQL or the DataFrame reader and writer, never Delta's
``DeltaTable`` API: Spark Connect clients (Databricks serverless, shared clusters) can only
reach that API through Delta's Connect plugin, which a server may not have, while Delta's
SQL commands need only the Delta extension that any Delta server loads.

Knows nothing of Service Bus names.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Self

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sbqueue.location import is_local, local_path
from sbqueue.spark.lazy import started
from sbqueue.spark.session import speaks_delta_errors
from sbqueue.store import appended, deadline, driver, log_reads, snapshot
from sbqueue.store.created import create_here
from sbqueue.store.guarded import DELTA_CONFLICTS, StaleRead, guarded_merge, merge_into
from sbqueue.store.logfiles import commit_versions, log_files
from sbqueue.store.sql import spark_writes, sql_name
from sbqueue.store.warm import FileKeep

__all__ = [
    "Table",
    "append",
    "commit_version",
    "create_table",
    "creates_here",
    "earliest_version",
    "is_delta_table",
    "isolation_level",
    "latest_version",
    "read_appended",
]


def create_table(
    spark: SparkSession,
    path: str,
    schema: StructType,
    partition_by: Sequence[str],
    properties: Mapping[str, str],
) -> None:
    """Create the Delta table at ``path`` unless it exists (concurrent creators are fine)."""
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}"
                        + ("" if f.nullable else " NOT NULL") for f in schema.fields)
    parts = f" PARTITIONED BY ({', '.join(f'`{c}`' for c in partition_by)})" \
        if partition_by else ""
    props = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    try:
        spark.sql(f"CREATE TABLE IF NOT EXISTS {sql_name(spark_writes(spark, path))} ({columns}) "
                  "USING delta"
                  f"{parts}{f' TBLPROPERTIES ({props})' if props else ''}")
    except DELTA_CONFLICTS:
        if not is_delta_table(spark, path):
            raise
    except Exception:
        if not _made_by_another(spark, path):
            raise


_DEFAULTS = "spark.databricks.delta.properties.defaults."


def creates_here(spark: SparkSession, path: str) -> bool:
    """Whether a new table at ``path`` is made on the driver: where commits are made here
    and the session sets no default properties for new Delta tables (Spark's create
    applies them, and may derive another protocol). Reading the session's settings is a
    round trip per setting (70-90 ms), so an entity's create asks once for its tables. A
    session not started yet (``spark.lazy``) has none: it is not asked, so no JVM starts."""
    return driver.commits_enabled(path) and (not started(spark) or not any(
        key.startswith(_DEFAULTS) for key in spark.conf.getAll))


def _made_by_another(spark: SparkSession, path: str, wait_s: float = 10.0) -> bool:
    """Whether a create that failed lost to another creator of the same table (one that
    finishes a killed create, decision 020): its folder is there and its log appears
    within ``wait_s``. A folder that never was there is a failure of this create."""
    if is_local(path) and not local_path(path).exists():
        return False
    deadline_at = time.monotonic() + wait_s
    while not is_delta_table(spark, path):
        if time.monotonic() > deadline_at:
            return False
        time.sleep(0.2)
    return True


def is_delta_table(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table is at ``path``: its log folder where local, else its detail."""
    if driver.enabled(path) or is_local(path):
        try:
            return any(n.endswith(".json") for n in log_files(path).names())
        except OSError:  # no log folder (or a file where it would be)
            return False
    try:
        row = spark.sql(f"DESCRIBE DETAIL {sql_name(path)}").select("format").first()
    except Exception:
        return False
    return row is not None and str(row[0]).lower() == "delta"


def append(df: DataFrame, path: str, *, txn: tuple[str, int] | None = None,
           tag: str | None = None) -> None:
    """Blind append. With ``txn=(app_id, version)`` Delta skips it if already done; with
    ``tag`` the commit carries it as its user metadata (``commit_version`` finds it)."""
    writer = df.write.format("delta").mode("append")
    if tag is not None:
        writer = writer.option("userMetadata", tag)
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", str(txn[1]))
    deadline.check()
    writer.save(spark_writes(df.sparkSession, path))


def latest_version(spark: SparkSession, path: str) -> int:
    """The table's newest committed version, without reading any data.

    Local tables: the highest commit file name in ``_delta_log`` (Delta's protocol names
    them by version), no Spark job. Elsewhere: ``DESCRIBE HISTORY ... LIMIT 1``, which reads
    only the log and works over Spark Connect too.
    """
    if driver.enabled(path):
        snap = driver.or_none(lambda: snapshot.current(path))
        if snap is not None:  # the commits since this process's last look: no listing
            return snap.version
    if driver.enabled(path) or is_local(path):
        return max(commit_versions(path))
    row = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").select("version").first()
    return int(row[0]) if row is not None else -1


def isolation_level(spark: SparkSession, path: str) -> str:
    """The table's ``delta.isolationLevel`` (Delta's default: WriteSerializable); reads only
    the log."""
    rows = spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
    found = {str(r[0]): str(r[1]) for r in rows}
    return found.get("delta.isolationLevel", "WriteSerializable")


def commit_version(spark: SparkSession, path: str, tag: str, depth: int = 1000) -> int:
    """The version of the commit that carries ``tag`` as its user metadata (``append``),
    among the newest ``depth``; reads only the log."""
    row = (spark.sql(f"DESCRIBE HISTORY {sql_name(path)} LIMIT {int(depth)}")
           .where(F.col("userMetadata") == tag).select("version").first())
    if row is None:
        raise LookupError(f"no commit tagged {tag!r} among the last {depth} of {path}")
    return int(row[0])


def earliest_version(spark: SparkSession, path: str) -> int:
    """The oldest version whose commit is still in the log (older ones were cleaned up
    after ``delta.logRetentionDuration``): the change data feed can start there at the
    earliest. Local tables: the lowest commit file name, no Spark job."""
    if driver.enabled(path) or is_local(path):
        return min(commit_versions(path))
    row = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg(F.min("version")).first()
    return int(row[0]) if row is not None and row[0] is not None else 0


def read_appended(
    spark: SparkSession, path: str, after_version: int, up_to_version: int, where: Column
) -> DataFrame:
    """Rows appended in versions (after_version, up_to_version], with ``_commit_version``.

    From the change data feed, which reads only those commits; when they are older than
    the log keeps (a reader far behind), from the table itself by each row's commit
    version (row tracking), so that log retention never strands a reader."""
    if after_version + 1 < earliest_version(spark, path):
        return (spark.read.format("delta").load(path)
                .withColumn("_commit_version", F.col("_metadata.row_commit_version"))
                .where(where & F.col("_commit_version").between(after_version + 1,
                                                                up_to_version)))
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", after_version + 1)
        .option("endingVersion", up_to_version)
        .load(path)
        .where(where & (F.col("_change_type") == "insert"))
        .drop("_change_type", "_commit_timestamp")
    )


@dataclass(frozen=True)
class Table:
    """One Delta table by its path: every read and write of it goes through here."""

    spark: SparkSession
    path: str
    as_of: int | None = None  # a past version this handle reads (``at``); None: the latest

    def __post_init__(self) -> None:
        speaks_delta_errors(self.spark)

    @property
    def sql_name(self) -> str:
        """The table in Spark SQL text (views, DML); a pinned handle's names its version."""
        pinned = "" if self.as_of is None else f" VERSION AS OF {int(self.as_of)}"
        return sql_name(self.path) + pinned

    def at(self, version: int) -> Self:
        """This table as of ``version`` (Delta time travel), for reads only."""
        return replace(self, as_of=version)

    def readable(self, version: int) -> bool | None:
        """Whether ``version`` can still be read (not cleaned from the log, its files not
        vacuumed); None where only reading it would tell (not a local folder)."""
        return log_reads.files_present(self.path, version)

    def commits(self) -> list[tuple[int, datetime]]:
        """Every version still in the log with its commit time (UTC), oldest first: read
        on the driver where the table is local, else ``DESCRIBE HISTORY``."""
        here = log_reads.commits(self.path)
        if here is not None:
            return here
        rows = self.history().select("version", "timestamp").collect()
        return sorted((int(r[0]), r[1].replace(tzinfo=timezone.utc)) for r in rows)

    def create(self, schema: StructType, partition_by: Sequence[str],
               properties: Mapping[str, str], protocol: Mapping[str, Any],
               here: bool | None = None) -> None:
        """Create the empty table unless it exists: on the driver where ``creates_here``
        (``store.created``, no Spark statement; ``here`` is its answer where the caller
        asked it already, for all of an entity's tables), else with Spark's
        ``CREATE TABLE`` (which derives the same ``protocol`` from the properties)."""
        if creates_here(self.spark, self.path) if here is None else here:
            create_here(self.path, schema, partition_by, properties, protocol)
        else:
            create_table(self.spark, self.path, schema, partition_by, properties)

    def exists(self) -> bool:
        return is_delta_table(self.spark, self.path)

    def read(self, version: int | None = None) -> DataFrame:
        """The table (as of ``version``): a lazy DataFrame, nothing read yet."""
        reader = self.spark.read.format("delta")
        version = self.as_of if version is None else version
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(self.path)

    def rows(self, where: Column | None = None, version: int | None = None) -> DataFrame:
        """The table's rows (as of ``version``), lazily, filtered by ``where``."""
        table = self.read(version)
        return table if where is None else table.where(where)

    def append(self, df: DataFrame, *, txn: tuple[str, int] | None = None,
               tag: str | None = None) -> None:
        append(df, self.path, txn=txn, tag=tag)

    def appended(self, after_version: int, up_to_version: int, where: Column) -> DataFrame:
        return read_appended(self.spark, self.path, after_version, up_to_version, where)

    def scan_here(self, partitions: Mapping[str, Sequence[object]],
                  columns: Sequence[str] | None,
                  keep: driver.Keep) -> list[driver.Row] | None:
        """``driver.scan``: rows read on the driver, no Spark job; None: read with Spark."""
        return driver.scan(self.path, partitions, columns, keep)

    def pin(self) -> driver.Pinned | None:
        """The table as of now, read on the driver (``driver.Pinned``); None: use Spark."""
        return driver.pin(self.path)

    def commits_here(self) -> bool:
        """Whether a rewrite on the driver may commit to this table (``driver``)."""
        return driver.commits_enabled(self.path)

    def append_here(self, rows: list[dict[str, Any]], tag: str) -> None:
        """``driver.append``: a blind append made on the driver (where ``commits_here``)."""
        driver.append(self.path, rows, tag)

    def rewrite_here(self, pinned: driver.Pinned, scope: Sequence[Mapping[str, Any]],
                     rows: list[dict[str, Any]]) -> None:
        """``Pinned.rewrite``; a conflict is a StaleRead (retried like a MERGE's)."""
        try:
            pinned.rewrite(scope, rows)
        except driver.Conflict as exc:
            raise StaleRead(str(exc)) from None

    def tagged_here(self, tag: str) -> int | None:
        """``log_reads.tagged_version``: the version tagged ``tag``; None: ask Spark."""
        return log_reads.tagged_version(self.path, tag)

    def stats_here(self, column: str) -> tuple[int, Any] | None:
        """``log_reads.file_stats``: (rows, largest ``column``) from the log; None: ask Spark."""
        return log_reads.file_stats(self.path, column)

    def appended_table_here(self, after_version: int, up_to_version: int,
                            columns: Sequence[str], cap: int, where: str | None = None
                            ) -> pa.Table | None:
        """``appended.appended_table``: appended rows as Arrow, read on the driver; None:
        read with Spark."""
        return appended.appended_table(self.path, after_version, up_to_version, columns, cap,
                                     where)

    def appended_here(self, after_version: int, up_to_version: int, columns: Sequence[str],
                      keep: driver.Keep, order: Sequence[str], limit: int,
                      where: str | None = None, take: FileKeep | None = None
                      ) -> list[driver.Row] | None:
        """``appended.appended``: the first appended rows read on the driver, no Spark job;
        None: read with Spark."""
        return appended.appended(self.path, after_version, up_to_version, columns, keep, order,
                               limit, where, take)

    def merge(self, scope: str, keys: Sequence[str], changes: DataFrame,
              columns: Sequence[str], match: str = "", delete_if: str = "false"
              ) -> dict[str, int]:
        return guarded_merge(self.spark, self.path, scope, keys, changes, columns, match,
                             delete_if)

    def insert_missing(self, rows: DataFrame, condition: str) -> None:
        """Insert the rows no stored row matches (``condition`` on ``t`` and ``s``): an
        idempotent write of rows that may have been written before; creates the table
        from the rows' schema when there is none."""
        if not self.exists():
            rows.limit(0).write.format("delta").mode("append").save(
                spark_writes(self.spark, self.path))
        merge_into(rows, self.path, condition, ["WHEN NOT MATCHED THEN INSERT *"])

    def _written(self) -> str:
        """The table's SQL name for a Spark write (``spark_writes``)."""
        return sql_name(spark_writes(self.spark, self.path))

    def delete(self, predicate: str) -> None:
        """Delete the rows ``predicate`` (SQL) selects."""
        deadline.check()
        self.spark.sql(f"DELETE FROM {self._written()} WHERE {predicate}")

    def compact(self, predicate: str) -> None:
        """OPTIMIZE the files ``predicate`` (on partition columns) selects."""
        self.spark.sql(f"OPTIMIZE {self._written()} WHERE {predicate}")

    def vacuum(self, hours: float) -> None:
        self.spark.sql(f"VACUUM {self._written()} RETAIN {float(hours)} HOURS")

    def committed_at(self) -> datetime | None:
        """When the latest version was committed: from the log on the driver where the table
        is local, else ``DESCRIBE HISTORY`` (two Spark jobs)."""
        here = log_reads.committed_at(self.path)
        if here is not None:
            return here
        row = self.history(1).select("timestamp").first()
        return None if row is None or row[0] is None else row[0].astimezone(timezone.utc)

    def recent_commits(self, limit: int | None = None) -> list[driver.Commit]:
        """The newest ``limit`` commits (None: all the log holds), newest first, as
        (version, time in UTC, operation, user metadata): from the log on the driver where
        the table is local, else ``DESCRIBE HISTORY``."""
        here = log_reads.history(self.path, limit)
        if here is not None:
            return here
        rows = self.history(limit).select(
            "version", "timestamp", "operation", "userMetadata").collect()
        return [(int(r[0]), r[1].astimezone(timezone.utc), str(r[2]), r[3]) for r in rows]

    def files_by_partition(self, columns: Sequence[str]) -> dict[tuple[Any, ...], int]:
        """How many data files each value of the partition ``columns`` holds: from the
        log's add actions on the driver where the table is local, else a Spark job."""
        here = log_reads.files_by_partition(self.path, columns)
        if here is not None:
            return here
        rows = (self.rows().select(*columns, "_metadata.file_path").distinct()
                .groupBy(*columns).count().collect())
        return {tuple(r[:-1]): int(r[-1]) for r in rows}

    def history(self, limit: int | None = None) -> DataFrame:
        """The commit history, newest first (reads only the log)."""
        return self.spark.sql(f"DESCRIBE HISTORY {self.sql_name}"
                              + (f" LIMIT {int(limit)}" if limit is not None else ""))

    def version(self) -> int:
        return latest_version(self.spark, self.path)

    def earliest_version(self) -> int:
        return earliest_version(self.spark, self.path)

    def tagged_version(self, tag: str) -> int:
        return commit_version(self.spark, self.path, tag)

    def isolation_level(self) -> str:
        """The table's ``delta.isolationLevel``: from the log on the driver where it is
        read here (a first ``SHOW TBLPROPERTIES`` cost a loaded machine 27 s, a client's
        first complete), else from Spark."""
        from deltalake.exceptions import DeltaError

        if driver.enabled(self.path):
            try:
                config = driver.latest(self.path).metadata().configuration
                return str(config.get("delta.isolationLevel", "WriteSerializable"))
            except (DeltaError, OSError, ValueError, RuntimeError):
                pass  # Spark reads it below
        return isolation_level(self.spark, self.path)
