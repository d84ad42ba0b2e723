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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sbqueue.core.properties import EntityStatus, SubscriptionProperties, TopicProperties
from sbqueue.core.rules import RuleProperties
from sbqueue.engine.rule_columns import RulePlan, with_props
from sbqueue.engine.schema import COPY_BITS, INBOX_SCHEMA
from sbqueue.engine.send import SendResult, send_dataframe
from sbqueue.exceptions import MessagingEntityDisabledError, ServiceBusQuotaExceededError

if TYPE_CHECKING:
    from sbqueue.engine.namespace import Namespace

__all__ = ["MAX_ACTION_RULES", "Topic", "fan_out"]

MAX_ACTION_RULES = (1 << COPY_BITS) - 1  # rule copies of one message: batch index bits


@dataclass(frozen=True)
class _Copy:
    subscription: str  # entity id
    rule: RuleProperties


def fan_out(rows: DataFrame, subscriptions: list[tuple[SubscriptionProperties,
                                                       list[RuleProperties]]]) -> DataFrame:
    """The inbox rows of a topic send: ``rows`` (prepared as for a queue) with ``targets``
    set, and one more row per matching rule with an action (S15.2)."""
    plan = RulePlan()
    plain: list[Column] = []
    copies: list[tuple[_Copy, Column]] = []
    for sub, rules in subscriptions:
        matched = [plan.filter_column(r.filter.tree()) for r in rules if r.action is None]
        if matched:
            any_match = matched[0]
            for m in matched[1:]:
                any_match = any_match | m
            plain.append(F.when(any_match, F.lit(sub.entity_id)))
        copies.extend((_Copy(sub.entity_id, r), plan.filter_column(r.filter.tree()))
                      for r in rules if r.action is not None)
    if len(copies) > MAX_ACTION_RULES:
        raise ServiceBusQuotaExceededError(
            f"the topic's subscriptions have {len(copies)} rules with actions; at most "
            f"{MAX_ACTION_RULES} (decision 009)")
    evaluated = plan.add_to(with_props(rows))
    if copies:  # evaluated once for the plain rows and every rule copy
        evaluated = evaluated.localCheckpoint()
    base = F.shiftleft(F.col("batch_index"), COPY_BITS)
    targets = F.filter(F.array(*plain), lambda t: t.isNotNull()) if plain \
        else F.array().cast("array<string>")
    parts = [evaluated.withColumns({"targets": targets, "batch_index": base})
             .where(F.size("targets") > 0)]
    for k, (copy, match) in enumerate(copies, start=1):
        action = copy.rule.action
        assert action is not None
        changed = RulePlan(f"_a{k}_")
        columns = changed.action_columns(action.statements(), copy.rule.name)
        parts.append(changed.add_to(evaluated.where(match)).withColumns(
            {**columns, "targets": F.array(F.lit(copy.subscription)),
             "batch_index": base + k}))
    names = [f.name for f in INBOX_SCHEMA.fields]
    result = parts[0].select(*names)
    for part in parts[1:]:
        result = result.unionByName(part.select(*names))
    return result


class Topic:
    """A topic of a namespace, for sends (S15.2). Its copies are received through its
    subscriptions (``Namespace.entity('<topic>/Subscriptions/<name>')``)."""

    def __init__(self, namespace: Namespace, props: TopicProperties) -> None:
        self.namespace = namespace
        self.props = props
        self.spark = namespace.spark
        self.inbox_path = namespace.catalog.data_path(props.entity_id, "inbox")
        self.partitions = props.partition_count

    @property
    def name(self) -> str:
        return self.props.name

    @property
    def path(self) -> str:
        return self.props.name

    @property
    def max_message_kilobytes(self) -> int | None:
        return self.props.max_message_size_in_kilobytes

    def check_status(self) -> None:
        """S16.1: a Disabled or SendDisabled topic refuses sends (read fresh)."""
        self.props = self.namespace.catalog.get("topic", self.props.name)
        if self.props.status in (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED):
            raise MessagingEntityDisabledError(
                f"topic {self.name} is {self.props.status.value}: send refused (S16.1)")

    def send_dataframe(self, df: DataFrame, round_robin_start: int = 0,
                       incoming_bytes: int = 0, send_id: str | None = None) -> SendResult:
        """Send ``df`` (the columns of a queue send) to every subscription whose rules
        match, in one commit (S15.2). ``SendResult.count`` counts the rows stored: the
        copies, not the messages."""
        _ = incoming_bytes
        self.check_status()
        subscriptions = self.namespace.catalog.topic_rules(self.props.name)
        fenced = self.namespace.catalog.fenced(self.props.entity_id)
        return send_dataframe(df, self.props, self.inbox_path, round_robin_start, fenced,
                              send_id, shape=lambda rows: fan_out(rows, subscriptions))
