"""The maintenance step (S8.2, S16.3, decision 010): per entity, partition by partition.

1. **idle**: an entity unused longer than ``auto_delete_on_idle`` is deleted (S16.3);
   use is the newest commit that maintenance did not make (Delta history).
2. **expire and advance**: a receive that hands nothing out: expired messages the cursor
   reaches or that wait in the ledger are dead-lettered or dropped (S8.2; a locked one
   stays with its holder, S8.3), and every partition's cursor moves past what it can
   (idle partitions to the newest commit), so readers stay within the change feed.
3. **segments**: inbox segments below every reader's cursor, with no ledger row pointing
   at them, are deleted partition by partition; passed segments still pointed at are
   compacted. Sends are blind appends: a DELETE or OPTIMIZE never aborts one.
4. **compact**: the ledger partitions with many small files are OPTIMIZEd one by one.
5. **vacuum**: files older than the retention (at least 7 days) are removed.

Checkpoints are Delta's own (``delta.checkpointInterval`` on every table); Delta has no
public call to force one. Scheduled topic messages need no activation: their copies are in
the subscriptions from the send on and become visible when due (decision 009).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.durations import is_never
from sbqueue.core.maintenance import (
    MAINTENANCE_OPERATIONS,
    Segment,
    SegmentPlan,
    idle_too_long,
    plan_segments,
)
from sbqueue.core.names import SUBSCRIPTIONS_SEGMENT
from sbqueue.core.properties import SubscriptionProperties, TopicProperties
from sbqueue.core.transitions import Lane
from sbqueue.engine.inbox import COMMIT_VERSION, Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.receive.attempt import ReceiveResult, first_cursor
from sbqueue.engine.receive.small import receive
from sbqueue.engine.schema import SEGMENT_SECONDS, WINDOW
from sbqueue.engine.storage_guard import storage_failure
from sbqueue.exceptions import InvalidOperationError
from sbqueue.store import driver
from sbqueue.store.delta import Table
from sbqueue.store.guarded import retry_conflicts

if TYPE_CHECKING:
    from sbqueue.engine.entity import Entity
    from sbqueue.engine.namespace import Namespace

__all__ = ["Maintainer", "MaintenanceReport", "last_use"]

log = logging.getLogger(__name__)
MARK = "sbqueue-maintenance"  # the userMetadata of maintenance's own commits
MIN_VACUUM_HOURS = 168.0  # Delta's safe default: readers may still need older files
MAX_PASSES = 64  # expire-and-advance attempts per entity (each reads a bounded window)
LEDGER_FILES = 8  # a ledger partition with more files than this is compacted


@dataclass(frozen=True)
class MaintenanceReport:
    """What one maintenance step did to one entity."""

    path: str
    kind: str
    deleted: bool = False
    cursor_commits: int = 0
    segments_dropped: int = 0
    segments_compacted: int = 0
    partitions_compacted: int = 0
    tables_vacuumed: int = 0
    seconds: float = 0.0
    error: str | None = None  # its storage failed: the step went on to the next entity


@contextlib.contextmanager
def _marked(spark: SparkSession) -> Iterator[None]:
    """Tag the commits made inside as maintenance's (so they are not an entity's use):
    Spark's by its session setting, the driver's (a cursor moved by a driver receive) by
    ``driver.marked``."""
    key = "spark.databricks.delta.commitInfo.userMetadata"
    spark.conf.set(key, MARK)
    try:
        with driver.marked(MARK):
            yield
    finally:
        spark.conf.unset(key)


def last_use(tables: list[Inbox | Ledger]) -> datetime | None:
    """The newest commit to these tables that maintenance did not make (S16.3), read
    from the log on the driver where the tables are local: the newest 200 commits, else
    all the log holds. A log holding only maintenance's commits (the older ones cleaned
    up) was last used no later than its oldest commit, which is taken: an entity is then
    deleted late, never early."""
    found: list[datetime] = []
    for table in tables:
        for limit in (200, None):
            commits = table.recent_commits(limit)
            use = next((at for _, at, operation, metadata in commits
                        if operation not in MAINTENANCE_OPERATIONS and metadata != MARK),
                       None)
            if use is not None or limit is None or len(commits) < limit:
                break
        if use is None and commits:
            use = commits[-1][1]
        if use is not None:
            found.append(use)
    return max(found) if found else None


class Maintainer:
    """Maintenance steps over a namespace's entities. ``now``: an injected clock (tests
    simulate days with it); it decides expiry, idleness and which segments are closed."""

    def __init__(self, namespace: Namespace, now: datetime | None = None,
                 vacuum_hours: float = MIN_VACUUM_HOURS, vacuum: bool = True) -> None:
        if vacuum_hours < MIN_VACUUM_HOURS:
            raise InvalidOperationError(
                f"vacuum retention {vacuum_hours} h is below {MIN_VACUUM_HOURS} h: readers "
                "and the change feed may still need those files")
        self.namespace = namespace
        self.spark = namespace.spark
        self.catalog = namespace.catalog
        self.fixed_now = now
        self.vacuum_hours = vacuum_hours
        self.vacuum = vacuum

    @property
    def now(self) -> datetime:
        return self.fixed_now or utcnow()

    def run(self, paths: list[str] | None = None) -> list[MaintenanceReport]:
        """One step over ``paths`` (queues, topics, ``topic/Subscriptions/sub``), default
        every entity: subscriptions before their topics (a topic's segments are dropped
        by its subscriptions' cursors)."""
        if paths is None:
            paths = [f"{s.topic_name}/{SUBSCRIPTIONS_SEGMENT}/{s.name}"
                     for s in self.catalog.entities("subscription")]
            paths += [t.name for t in self.catalog.entities("topic")]
            paths += [q.name for q in self.catalog.entities("queue")]
        return [self._isolated(path) for path in paths]

    def _isolated(self, path: str) -> MaintenanceReport:
        """``maintain(path)``; an entity whose storage fails is reported, and the step goes
        on with the others (issue 21 point 4)."""
        try:
            return self.maintain(path)
        except Exception as exc:
            failure = storage_failure(path, "maintenance", exc)
            if failure is None:
                raise
            log.error("%s", failure)
            return MaintenanceReport(path, "unknown", error=str(failure))

    def maintain(self, path: str) -> MaintenanceReport:
        """One step of one entity; its commits are marked as maintenance's."""
        started = time.monotonic()
        with _marked(self.spark):
            if self.catalog.exists("topic", path) and not self.catalog.queue_exists(path):
                report = self._topic(self.catalog.get("topic", path))
            else:
                report = self._entity(self.namespace.entity(path))
        log.info("maintained %s: %s", path, report)
        return replace(report, seconds=round(time.monotonic() - started, 2))

    # -- queues and subscriptions ----------------------------------------------------------
    def _entity(self, entity: Entity) -> MaintenanceReport:
        kind = "subscription" if isinstance(entity.props, SubscriptionProperties) else "queue"
        tables: list[Inbox | Ledger] = [entity.ledger] + (
            [entity.inbox] if kind == "queue" else [])
        if idle_too_long(last_use(tables), self.now,
                         entity.props.auto_delete_on_idle):
            topic = getattr(entity.props, "topic_name", None)
            self.namespace.delete_storage(kind, entity.props.name, topic)
            return MaintenanceReport(entity.path, kind, deleted=True)
        commits = self._advance(entity)
        plan = SegmentPlan()
        if kind == "queue":
            plan = self._segments(entity.inbox, [entity.ledger], entity.partitions,
                                  entity.dedupe)
        compacted = self._compact_ledger(entity.ledger)
        vacuumed = self._vacuum([entity.ledger] + (
            [entity.inbox] if kind == "queue"
            and self._may_vacuum(entity.inbox, [entity.ledger], entity.partitions) else []))
        return MaintenanceReport(
            entity.path, kind, cursor_commits=commits,
            segments_dropped=sum(map(len, plan.drop.values())),
            segments_compacted=sum(map(len, plan.compact.values())),
            partitions_compacted=compacted, tables_vacuumed=vacuumed)

    def _advance(self, entity: Entity) -> int:
        """Expire and move cursors: receives of nothing until nothing changes."""
        fenced = self.catalog.fenced(entity.props.entity_id)
        partitions = [p for p in range(entity.partitions) if p not in fenced]
        now = self.now
        # Up to the newest commit as of now: busy senders do not keep the step going.
        newest = entity.inbox.version()

        def attempt() -> ReceiveResult:
            a = entity.make_attempt(partitions, 0, 0, True)
            a = replace(a, advance_idle=True, latest_version=newest,
                        ctx=replace(a.ctx, now=now, locked_until=now))
            return receive(entity.ledger, entity.inbox, a, Lane.MAIN)

        commits = 0
        for _ in range(MAX_PASSES):
            if not retry_conflicts(attempt, what=f"maintain {entity.path}").committed:
                break
            commits += 1
        return commits

    # -- topics ------------------------------------------------------------------------------
    def _topic(self, topic: TopicProperties) -> MaintenanceReport:
        subs = [self.namespace.entity(f"{topic.name}/{SUBSCRIPTIONS_SEGMENT}/{s.name}")
                for s in self.catalog.entities("subscription", topic=topic.name)]
        inbox = Inbox(self.spark, self.catalog.data_path(topic.entity_id, "inbox"))
        ledgers = [s.ledger for s in subs]
        if idle_too_long(last_use([inbox, *ledgers]), self.now,
                         topic.auto_delete_on_idle):
            self.namespace.delete_storage("topic", topic.name)
            return MaintenanceReport(topic.name, "topic", deleted=True)
        window = topic.duplicate_detection_history_time_window \
            if topic.requires_duplicate_detection else None
        plan = self._segments(inbox, ledgers, topic.partition_count, window)
        return MaintenanceReport(
            topic.name, "topic", segments_dropped=sum(map(len, plan.drop.values())),
            segments_compacted=sum(map(len, plan.compact.values())),
            tables_vacuumed=self._vacuum(
                [inbox] if self._may_vacuum(inbox, ledgers, topic.partition_count) else []))

    # -- tables ------------------------------------------------------------------------------
    def _segments(self, inbox: Inbox, ledgers: list[Ledger], partitions: int,
                  dedupe: timedelta | None) -> SegmentPlan:
        """Drop the inbox segments every reader passed and nothing points at; compact
        the passed ones still pointed at. One DELETE / OPTIMIZE per partition."""
        rows = inbox.rows().groupBy("partition_id", "segment").agg(
            F.max(COMMIT_VERSION), F.countDistinct("_metadata.file_path")).collect()
        segments = [Segment(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]
        cursors = self._cursors(ledgers, partitions)
        referenced: set[tuple[int, int]] = set()
        for ledger in ledgers:
            referenced |= ledger.segments_held(partitions)
        keep = dedupe if dedupe is not None and not is_never(dedupe) else timedelta(0)
        plan = plan_segments(segments, cursors, referenced, self.now, keep, SEGMENT_SECONDS)
        for partition, segs in sorted(plan.drop.items()):
            retry_conflicts(lambda p=partition, s=segs: inbox.drop_segments(  # type: ignore[misc]
                p, s), what=f"drop segments of {inbox.path}")
        for partition, segs in sorted(plan.compact.items()):
            listed = ", ".join(str(s) for s in segs)
            _compact(inbox, f"partition_id = {partition} AND segment IN ({listed})")
        return plan

    def _cursors(self, ledgers: list[Ledger], partitions: int
                 ) -> dict[int, tuple[int, int]] | None:
        """Per partition, the oldest reader's cursor (version, index); None: no reader. A
        reader without a p row for a partition has passed nothing there (version 0)."""
        if not ledgers:
            return None
        oldest: dict[int, tuple[int, int]] = {}
        for ledger in ledgers:
            # A forwarding window's w row holds where it starts as a cursor: its rows are
            # still to be written (decision 017).
            stored: dict[int, tuple[int, int]] = {}
            for partition, version, index in ledger.places(("p", WINDOW), partitions):
                stored[partition] = min(stored.get(partition, (version, index)),
                                        (version, index))
            for partition in range(partitions):
                first = first_cursor(partition)
                here = stored.get(partition, (first.version, first.position))
                oldest[partition] = min(oldest.get(partition, here), here)
        return oldest

    def _compact_ledger(self, ledger: Ledger) -> int:
        """OPTIMIZE each ledger partition holding more than LEDGER_FILES files."""
        counts = ledger.files_by_partition(["partition_id"])
        busy = sorted(int(key[0]) for key, files in counts.items() if files > LEDGER_FILES)
        for partition in busy:
            _compact(ledger, f"partition_id = {partition}")
        return len(busy)

    def _may_vacuum(self, inbox: Inbox, ledgers: list[Ledger], partitions: int) -> bool:
        """VACUUM deletes the files that commits older than the retention removed (dropped
        or compacted segments). A reader whose cursor is at or before such a commit, and
        still within the log, reads it through the change feed and needs those files:
        then the inbox waits (a reader behind the log reads the snapshot instead)."""
        horizon = utcnow() - timedelta(hours=self.vacuum_hours)
        removing = max((version for version, at, operation, _ in inbox.recent_commits()
                        if operation in ("DELETE", "OPTIMIZE") and at < horizon),
                       default=None)
        if removing is None:
            return True
        earliest = inbox.earliest_version()
        cursors = self._cursors(ledgers, partitions) or {}
        return not any(earliest <= version <= removing for version, _ in cursors.values())

    def _vacuum(self, tables: list[Inbox | Ledger]) -> int:
        if not self.vacuum:
            return 0
        for table in tables:
            table.vacuum(self.vacuum_hours)
        return len(tables)


def _compact(table: Table, predicate: str) -> None:
    """OPTIMIZE the files matching a partition predicate (retried on a conflict with a
    receive's commit; appends never conflict with it)."""
    retry_conflicts(lambda: table.compact(predicate), what=f"compact {predicate}")
