"""A topic send: every row validated and routed as a queue send, its subscriptions' rules
evaluated in one projection, and all copies written in ONE inbox commit (SPEC S15.2).

A message becomes at most one plain row (``targets``: every subscription where a rule
without an action matched) and one row per matching rule with an action (that rule's
copy: its action applied, ``RuleName`` set, ``targets`` its one subscription). A message
that matched nothing is dropped; the send still succeeds. One blind append is the whole
fan-out, so a crash leaves every copy visible or none (decision 009). Subscriptions read
their rows of the topic's inbox through their own ledgers (``owned_rows``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.names import SUBSCRIPTIONS_SEGMENT
from sbqueue.core.properties import EntityStatus, SubscriptionProperties, TopicProperties
from sbqueue.core.routing import RoundRobin
from sbqueue.core.rules import RuleProperties
from sbqueue.core.sequence import counter_of, partition_of, sequence_of
from sbqueue.engine.columns import now_column
from sbqueue.engine.inbox import ROW_ID, Inbox
from sbqueue.engine.quota import Quota
from sbqueue.engine.reads.view import inbox_bound
from sbqueue.engine.reads.view_here import view_rows_here
from sbqueue.engine.receive.attempt import as_aware
from sbqueue.engine.schema import COPY_BITS, INBOX_SCHEMA, dead_letter_mark
from sbqueue.engine.send.frame import SendResult, send_dataframe
from sbqueue.engine.send.small import SMALL_SEND, Outgoing, commit_once, inbox_rows, result_of
from sbqueue.engine.storage_guard import storage_guarded
from sbqueue.engine.topics.fan_out_here import fan_out_rows
from sbqueue.engine.topics.rules import RulePlan, with_props
from sbqueue.exceptions import (
    MessageNotFoundError,
    MessagingEntityDisabledError,
    ServiceBusQuotaExceededError,
)

if TYPE_CHECKING:
    from sbqueue.engine.entity import Entity
    from sbqueue.engine.handle import Home

__all__ = ["MAX_ACTION_RULES", "Topic", "fan_out"]

MAX_ACTION_RULES = (1 << COPY_BITS) - 1  # rule copies of one message: batch index bits
_SPAN = 1 << COPY_BITS


@dataclass(frozen=True)
class _Copy:
    subscription: str  # entity id
    rule: RuleProperties
    requires_session: bool

    def targets(self, session_id: Column) -> Column:
        """The rule copy's ``targets``: its subscription, and on a session subscription
        its dead-letter mark when the copy has no session id (S10.1)."""
        if not self.requires_session:
            return F.array(F.lit(self.subscription))
        mark = F.when(session_id.isNull(), F.lit(dead_letter_mark(self.subscription)))
        return F.filter(F.array(F.lit(self.subscription), mark), lambda t: t.isNotNull())


def fan_out(rows: DataFrame, subscriptions: list[tuple[SubscriptionProperties,
                                                       list[RuleProperties]]]) -> DataFrame:
    """The inbox rows of a topic send: per row of ``rows`` (prepared as for a queue) its
    plain copy with ``targets`` set, and one copy per matching rule with an action (S15.2).

    Every copy is built as a struct in one array per message and the array is exploded: no
    Filter and no Union. A Filter above the rule columns is pushed down through their
    projections by Spark's optimizer, which inlines every bound column into the predicate;
    with ten subscriptions the optimized plan reached 30 MB and the driver ran out of heap
    (decision 009)."""
    plan = RulePlan()
    plain: list[Column] = []
    copies: list[tuple[_Copy, Column, dict[str, Column]]] = []
    for sub, rules in subscriptions:
        matched = [plan.filter_column(r.filter.tree()) for r in rules if r.action is None]
        if matched:
            any_match = matched[0]
            for m in matched[1:]:
                any_match = any_match | m
            plain.append(F.when(any_match, F.lit(sub.entity_id)))
            if sub.requires_session:  # S10.1: in its dead-letter queue from the send on
                plain.append(F.when(any_match & F.col("session_id").isNull(),
                                    F.lit(dead_letter_mark(sub.entity_id))))
        for r in rules:
            if r.action is not None:
                match = plan.filter_column(r.filter.tree())
                copies.append((_Copy(sub.entity_id, r, sub.requires_session), match,
                               plan.action_columns(r.action.statements(), r.name)))
    if len(copies) > MAX_ACTION_RULES:
        raise ServiceBusQuotaExceededError(
            f"the topic's subscriptions have {len(copies)} rules with actions; at most "
            f"{MAX_ACTION_RULES} (decision 009)")
    evaluated = plan.add_to(with_props(rows))
    names = [f.name for f in INBOX_SCHEMA.fields]
    base = F.shiftleft(F.col("batch_index"), COPY_BITS)
    targets = F.filter(F.array(*plain), lambda t: t.isNotNull()) if plain \
        else F.array().cast("array<string>")

    def copy_struct(changes: dict[str, Column]) -> Column:
        return F.struct(*[changes.get(n, F.col(f"`{n}`")).alias(n) for n in names])

    # A message matching nothing is dropped, unless it is scheduled: its plain row then
    # stays at the topic until due (S8.5), giving it a topic sequence number.
    future = F.coalesce(F.col("scheduled_enqueue_time_utc") > now_column(),
                        F.lit(False))
    structs = [F.when((F.size(targets) > 0) | future,
                      copy_struct({"targets": targets, "batch_index": base}))]
    for k, (copy, match, columns) in enumerate(copies, start=1):
        structs.append(F.when(match, copy_struct(
            {**columns, "targets": copy.targets(columns.get("session_id", F.col("session_id"))),
             "batch_index": base + k})))
    present = F.filter(F.array(*structs), lambda c: c.isNotNull())
    return evaluated.select(F.explode(present).alias("_copy")).select("_copy.*")


@storage_guarded
class Topic:
    """A topic of a namespace, for sends (S15.2). Its copies are received through its
    subscriptions (``Namespace.entity('<topic>/Subscriptions/<name>')``)."""

    def __init__(self, namespace: Home, props: TopicProperties) -> None:
        self.namespace = namespace
        self.props = props
        self.spark = namespace.spark
        self.inbox = Inbox(self.spark, namespace.catalog.data_path(props.entity_id, "inbox"))
        self.partitions = props.partition_count
        self._spread = RoundRobin(self.partitions, random.randrange(max(1, self.partitions)))
        # S1.6: a topic holds what its subscriptions hold (each copy counted).
        self.quota = Quota(props.name, lambda: self.props.max_size_in_megabytes,
                           self.partitions, lambda: inbox_bound(self.inbox),
                           lambda: sum(int(e.counts()["size_in_bytes"])
                                       for e in self._subscriptions()))

    @property
    def name(self) -> str:
        return self.props.name

    @property
    def path(self) -> str:
        return self.props.name

    @property
    def max_message_kilobytes(self) -> int | None:
        return self.props.max_message_size_in_kilobytes

    def _reload(self) -> None:
        self.props = self.namespace.catalog.get("topic", self.props.name)

    def check_status(self) -> None:
        """S16.1: a Disabled or SendDisabled topic refuses sends (read fresh)."""
        self._reload()
        if self.props.status in (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED):
            raise MessagingEntityDisabledError(
                f"topic {self.name} is {self.props.status.value}: send refused (S16.1)")

    def send_forwarded(self, rows: Sequence[Mapping[str, Any]], send_id: str) -> bool:
        """A topic takes a forwarding batch through its Spark fan-out only (its rules are
        evaluated there): False, as ``Entity.send_forwarded`` where it cannot append."""
        return False

    def send_once(self, messages: Sequence[Outgoing], app_id: str, version: int) -> bool:
        """Send ``messages`` to the subscriptions whose rules match, in one driver commit,
        at most once per ``(app_id, version)``: the rows a DataFrame send makes, fanned out
        by ``topics.fan_out_here`` (a streaming sink's batch, decision 024)."""
        def rows_for(send_id: str) -> list[dict[str, Any]]:
            self.check_status()
            fenced = self.namespace.catalog.fenced(self.props.entity_id)
            rows = inbox_rows(messages, self.props, fenced, self._spread, send_id)
            return fan_out_rows(rows, self.namespace.catalog.topic_rules(self.props.name),
                                utcnow())

        return commit_once(self.inbox, self.quota, self.name, app_id, version, rows_for)

    def send_messages(self, messages: Sequence[Outgoing], incoming_bytes: int,
                      as_dataframe: Callable[[], DataFrame]) -> SendResult:
        """A client send: fanned out (``topics.fan_out_here``) and committed on the driver where the
        inbox is local and the send small, no Spark job; else ``as_dataframe()`` sent as a
        DataFrame. The same rows either way (S15.2)."""
        if len(messages) > SMALL_SEND or not self.inbox.commits_here():
            return self.send_dataframe(as_dataframe(), incoming_bytes=incoming_bytes)
        self.check_status()
        self.quota.check(incoming_bytes)
        send_id = uuid.uuid4().hex
        fenced = self.namespace.catalog.fenced(self.props.entity_id)
        rows = fan_out_rows(inbox_rows(messages, self.props, fenced, self._spread, send_id),
                            self.namespace.catalog.topic_rules(self.props.name), utcnow())
        version = self.inbox.append_small(rows, send_id) if rows else None
        if rows and version is None:
            return self.send_dataframe(as_dataframe(), incoming_bytes=incoming_bytes)
        result = result_of(rows, send_id, version)
        self.quota.add(result.size_in_bytes)
        return result

    def send_dataframe(self, df: DataFrame, round_robin_start: int = 0,
                       incoming_bytes: int = 0, send_id: str | None = None,
                       forwarded: bool = False, idempotent: bool = False) -> SendResult:
        """Send ``df`` (the columns of a queue send) to every subscription whose rules
        match, in one commit (S15.2). ``SendResult.count`` counts the rows stored: the
        copies, not the messages. ``forwarded``: a forwarding step's batch (decision 010)."""
        self.check_status()
        self.quota.check(incoming_bytes)
        subscriptions = self.namespace.catalog.topic_rules(self.props.name)
        fenced = self.namespace.catalog.fenced(self.props.entity_id)
        result = send_dataframe(df, self.props, self.inbox, round_robin_start, fenced,
                                send_id, shape=lambda rows: fan_out(rows, subscriptions),
                                forwarded=forwarded, idempotent=idempotent)
        self.quota.add(result.size_in_bytes)
        return result

    # -- scheduled messages stay at the topic until due (S8.5) -----------------------------
    def sequence_numbers(self, send_id: str) -> list[int]:
        """A send's topic sequence numbers, in send order: the partition with a counter one more
        than the row id (Delta row tracking) of each message's plain row (S3.4, S8.5). Read
        on the driver from the send's commit where it can be, else with Spark."""
        here = self.inbox.send_rows_here(send_id, ["send_id", "batch_index"])
        if here is not None:
            plain = sorted((r for r in here if r["batch_index"] % _SPAN == 0),
                           key=lambda r: int(r["batch_index"]))
            return [sequence_of(int(r["partition_id"]), int(r[ROW_ID]) + 1) for r in plain]
        rows = (self.inbox.rows((F.col("send_id") == send_id)
                                & (F.col("batch_index") % _SPAN == 0))
                .select("partition_id", "batch_index", F.col("_metadata.row_id").alias("rid"))
                .orderBy("batch_index").collect())
        return [sequence_of(int(r[0]), int(r[2]) + 1) for r in rows]

    def cancel_scheduled(self, sequence_numbers: list[int]) -> None:
        """Cancel scheduled topic messages not yet due: every subscription's copy goes
        (S8.4, S8.5). MessageNotFound, naming the topic's numbers, for an unknown, active or
        already cancelled one; then nothing is cancelled. Each read is made on the driver
        where it can be (``Inbox.rows_by_id_here``, ``view_rows_here``), else with Spark."""
        self.check_status()
        seqs = sorted(set(sequence_numbers))
        if not seqs:
            return
        plain = self._plain(seqs)
        now = utcnow()
        if len(plain) < len(seqs) or any(not _ahead(r["scheduled_enqueue_time_utc"], now)
                                         for r in plain):
            raise MessageNotFoundError(
                f"topic {self.name}: sequence numbers {seqs} are not all scheduled messages "
                "still waiting (unknown, cancelled or already active; S8.4)")
        topic_seq = {(str(r["send_id"]), int(r["batch_index"]) >> COPY_BITS):
                     sequence_of(int(r["partition_id"]), int(r[ROW_ID]) + 1) for r in plain}
        copies = {entity: [(seq, key) for seq, key in _scheduled_copies(entity)
                           if key in topic_seq]
                  for entity in self._subscriptions()}
        held = {key for found in copies.values() for _, key in found}
        gone = sorted(topic_seq[k] for k in self._targeted(set(topic_seq)) - held)
        if gone:
            raise MessageNotFoundError(
                f"topic {self.name}: sequence numbers {gone} were already cancelled (S8.4)")
        for entity, found in copies.items():
            if not found:
                continue
            try:
                entity.cancel_scheduled([seq for seq, _ in found])
            except MessageNotFoundError:  # became due or was cancelled meanwhile
                raise MessageNotFoundError(
                    f"topic {self.name}: sequence numbers {seqs} are no longer all scheduled "
                    "(S8.4)") from None

    def _plain(self, seqs: list[int]) -> list[dict[str, Any]]:
        """The plain rows of the topic messages numbered ``seqs`` (those found)."""
        columns = ["send_id", "batch_index", "scheduled_enqueue_time_utc"]
        found: list[dict[str, Any]] = []
        for partition in sorted({partition_of(seq) for seq in seqs}):
            ids = [counter_of(seq) - 1 for seq in seqs if partition_of(seq) == partition]
            here = self.inbox.rows_by_id_here(partition, ids, columns)
            if here is None:
                return self._plain_by_spark(seqs)
            found += [r for r in here.values() if int(r["batch_index"]) % _SPAN == 0]
        return found

    def _plain_by_spark(self, seqs: list[int]) -> list[dict[str, Any]]:
        wanted = F.lit(False)
        for seq in seqs:
            wanted = wanted | ((F.col("partition_id") == partition_of(seq))
                               & (F.col("_metadata.row_id") == counter_of(seq) - 1))
        rows = self.inbox.rows(wanted & (F.col("batch_index") % _SPAN == 0)).select(
            "partition_id", "send_id", "batch_index", "scheduled_enqueue_time_utc",
            F.col("_metadata.row_id").alias(ROW_ID)).collect()
        return [as_aware(r) for r in rows]

    def _targeted(self, messages: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """The messages of ``messages`` that had a copy sent to a subscription."""
        sends = sorted({m[0] for m in messages})
        rows: list[tuple[str, int]] = []
        for send_id in sends:
            here = self.inbox.send_rows_here(send_id, ["send_id", "batch_index", "targets"])
            if here is None:
                rows = [(str(r[0]), int(r[1])) for r in self.inbox.rows(
                    F.col("send_id").isin(sends) & (F.size("targets") > 0))
                    .select("send_id", "batch_index").collect()]
                break
            rows += [(send_id, int(r["batch_index"])) for r in here if r["targets"]]
        return {key for send, index in rows
                if (key := (send, index >> COPY_BITS)) in messages}

    def _subscriptions(self) -> list[Entity]:
        return [self.namespace.entity(f"{self.name}/{SUBSCRIPTIONS_SEGMENT}/{sub.name}")
                for sub in self.namespace.catalog.entities("subscription", topic=self.name)]

    def scheduled_count(self) -> int:
        """Scheduled messages waiting at the topic (S8.5, S16.2): each counted once,
        however many subscriptions hold a copy; a cancelled one no longer counts."""
        waiting = {key for entity in self._subscriptions()
                   for _, key in _scheduled_copies(entity)}
        return len(waiting | self._unmatched_scheduled(utcnow()))

    def _unmatched_scheduled(self, now: datetime) -> set[tuple[str, int]]:
        """Scheduled messages no subscription took (no target), by (send id, message
        index): read on the driver where the inbox is local, else with Spark."""
        here = self.inbox.scan_here(
            {"partition_id": list(range(self.partitions))},
            ["send_id", "batch_index", "targets", "scheduled_enqueue_time_utc"],
            lambda r: not r["targets"] and _ahead(r["scheduled_enqueue_time_utc"], now))
        if here is not None:
            return {(str(r["send_id"]), int(r["batch_index"]) >> COPY_BITS) for r in here}
        rows = (self.inbox.rows((F.size("targets") == 0)
                                & (F.col("scheduled_enqueue_time_utc") > F.lit(now)))
                .select("send_id", F.shiftright("batch_index", COPY_BITS)).collect())
        return {(str(r[0]), int(r[1])) for r in rows}


def _scheduled_copies(entity: Entity) -> list[tuple[int, tuple[str, int]]]:
    """A subscription's scheduled copies: (sequence number there, (send id, message
    index)), from its rows read on the driver where it can be, else from its view."""
    here = view_rows_here(entity.inbox, entity.ledger, range(entity.partitions),
                          entity.target, utcnow(), narrow=True, internal=True)
    if here is not None:
        return [(int(r["sequence_number"]), (str(r["_send_id"]),
                                             int(r["_batch_index"]) >> COPY_BITS))
                for r in here if r["state"] == "Scheduled"]
    rows = (entity.messages(internal=True).where(F.col("state") == "Scheduled")
            .select("sequence_number", "_send_id",
                    F.shiftright("_batch_index", COPY_BITS).alias("_message")).collect())
    return [(int(r[0]), (str(r[1]), int(r[2]))) for r in rows]


def _ahead(scheduled: datetime | None, now: datetime) -> bool:
    """Whether a schedule (aware UTC) is still in the future."""
    return scheduled is not None and scheduled > now
