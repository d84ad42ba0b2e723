"""A topic send's fan-out decided on the driver: ``topics.topic.fan_out`` on plain rows.

Why: a Python data source's worker (``sbqueue.datasource``) has no Spark to run the rule
projection, yet a stream into a topic must give each subscription what a DataFrame send
would. The rules are evaluated by ``core.rule_eval``, the Python twin of the projection
(the rule fuzz tests hold the two to the same answers, NULL semantics included):

- a message's plain row lists, in ``targets``, every subscription where a rule without an
  action matched (and, on a session subscription, its dead-letter mark when the message
  has no session id, S10.1); a message nothing matched is dropped unless it is scheduled
  ahead, when its plain row waits at the topic (S8.5);
- each matching rule with an action gives a copy of its own: the action applied (S15.6),
  ``RuleName`` set to the rule's name (S15.2), numbered ``batch_index << COPY_BITS`` plus
  its place among the topic's action rules (decision 009).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pyspark.sql.types import VariantVal

from sbqueue.core.properties import SubscriptionProperties
from sbqueue.core.rule_eval import RuleMessage, apply_actions, matches, message_view
from sbqueue.core.rule_syntax import SYSTEM_PROPERTIES
from sbqueue.core.rules import RuleProperties
from sbqueue.engine.schema import COPY_BITS, dead_letter_mark
from sbqueue.exceptions import ServiceBusQuotaExceededError
from sbqueue.store.variant import encode_object

__all__ = ["fan_out_rows"]

Row = dict[str, Any]
Subscriptions = list[tuple[SubscriptionProperties, list[RuleProperties]]]
_SYSTEM = sorted(set(SYSTEM_PROPERTIES.values()))
_MAX_COPIES = (1 << COPY_BITS) - 1


def _marked(sub: SubscriptionProperties, session_id: str | None) -> list[str]:
    """A subscription's targets for one row: itself, and its dead-letter mark (S10.1)."""
    if sub.requires_session and session_id is None:
        return [sub.entity_id, dead_letter_mark(sub.entity_id)]
    return [sub.entity_id]


def _properties(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """A row's application properties as the rules see them (as Spark reads the VARIANT:
    no type notes)."""
    stored = row["application_properties"]
    if stored is None:
        return None
    decoded = VariantVal(stored["value"], stored["metadata"]).toPython()
    return dict(decoded) if isinstance(decoded, Mapping) else None


def _copy(row: Row, after: RuleMessage, rule: str, sub: SubscriptionProperties, k: int
          ) -> Row:
    user = {key: v for key, v in after.user.items() if key.lower() != "rulename"}
    user["RuleName"] = rule
    value, metadata = encode_object(user)
    fields = {name: after.system.get(name) for name in _SYSTEM}
    return {**row, **fields, "application_properties": {"value": value, "metadata": metadata},
            "targets": _marked(sub, fields["session_id"]),
            "batch_index": (int(row["batch_index"]) << COPY_BITS) + k}


def fan_out_rows(rows: list[Row], subscriptions: Subscriptions, now: datetime) -> list[Row]:
    """The inbox rows of a topic send of ``rows`` (prepared as for a queue)."""
    plain = [(sub, [r.filter.tree() for r in rules if r.action is None])
             for sub, rules in subscriptions]
    actions = [(sub, r.name, r.filter.tree(), r.action.statements())
               for sub, rules in subscriptions for r in rules if r.action is not None]
    if len(actions) > _MAX_COPIES:
        raise ServiceBusQuotaExceededError(
            f"the topic's subscriptions have {len(actions)} rules with actions; at most "
            f"{_MAX_COPIES} (decision 009)")
    out: list[Row] = []
    for row in rows:
        view = message_view(row, _properties(row))
        targets = [target for sub, trees in plain
                   if any(matches(tree, view) for tree in trees)
                   for target in _marked(sub, row["session_id"])]
        scheduled = row["scheduled_enqueue_time_utc"]
        if targets or (scheduled is not None and scheduled > now):
            out.append({**row, "targets": targets,
                        "batch_index": int(row["batch_index"]) << COPY_BITS})
        for k, (sub, name, tree, statements) in enumerate(actions, start=1):
            if matches(tree, view):
                out.append(_copy(row, apply_actions(statements, view), name, sub, k))
    return out
