"""Subscription rules as ``azure.servicebus.management`` shapes them (SPEC S15.1-S15.7):
filters, actions and ``RuleProperties``, with their JSON form (kept in the subscription's
catalog document) and their syntax trees (``core.rule_syntax``). Every filter kind becomes
one tree, so matching has a single Python evaluator and a single Spark compiler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sbqueue.core.clock import utcnow
from sbqueue.core.names import validate_short_name
from sbqueue.core.rule_syntax import (
    Action,
    Binary,
    Literal,
    Logical,
    Node,
    Property,
    check_parameters,
    parse_action,
    parse_filter,
)
from sbqueue.core.sizes import is_utf8
from sbqueue.exceptions import InvalidOperationError

__all__ = [
    "DEFAULT_RULE_NAME",
    "CorrelationRuleFilter",
    "FalseRuleFilter",
    "RuleFilter",
    "RuleProperties",
    "SqlRuleAction",
    "SqlRuleFilter",
    "TrueRuleFilter",
    "describe_filter",
]

DEFAULT_RULE_NAME = "$Default"
_CORRELATION_FIELDS = {  # CorrelationRuleFilter attribute -> message field (S15.3)
    "correlation_id": "correlation_id", "message_id": "message_id", "to": "to",
    "reply_to": "reply_to", "label": "subject", "session_id": "session_id",
    "reply_to_session_id": "reply_to_session_id", "content_type": "content_type",
}


class SqlRuleFilter:
    """A SQL filter (S15.4) with optional ``@parameters``; checked when a rule is made."""

    def __init__(self, sql_expression: str, parameters: dict[str, Any] | None = None) -> None:
        self.sql_expression = sql_expression
        self.parameters = check_parameters(parameters)

    def tree(self) -> Node:
        return parse_filter(self.sql_expression, self.parameters)

    def to_json(self) -> dict[str, Any]:
        return {"type": "sql", "sql_expression": self.sql_expression,
                "parameters": self.parameters}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sql_expression!r})"

    __hash__ = None  # type: ignore[assignment]


class TrueRuleFilter(SqlRuleFilter):
    """Matches every message (the ``$Default`` rule's filter, S15.1)."""

    def __init__(self) -> None:
        super().__init__("1=1")

    def to_json(self) -> dict[str, Any]:
        return {"type": "true"}


class FalseRuleFilter(SqlRuleFilter):
    """Matches no message."""

    def __init__(self) -> None:
        super().__init__("1=0")

    def to_json(self) -> dict[str, Any]:
        return {"type": "false"}


class CorrelationRuleFilter:
    """Equality on system fields and user properties, all set ones at once (S15.3)."""

    def __init__(self, *, correlation_id: str | None = None, message_id: str | None = None,
                 to: str | None = None, reply_to: str | None = None, label: str | None = None,
                 session_id: str | None = None, reply_to_session_id: str | None = None,
                 content_type: str | None = None,
                 properties: dict[str, Any] | None = None) -> None:
        self.correlation_id = correlation_id
        self.message_id = message_id
        self.to = to
        self.reply_to = reply_to
        self.label = label
        self.session_id = session_id
        self.reply_to_session_id = reply_to_session_id
        self.content_type = content_type
        if properties is not None and not isinstance(properties, Mapping):
            raise InvalidOperationError(
                f"correlation filter properties {properties!r:.80} are not a map (S15.3)")
        self.properties = dict(properties or {})

    def tree(self) -> Node:
        terms: list[Node] = []
        for attr, column in _CORRELATION_FIELDS.items():
            value = getattr(self, attr)
            if value is not None:
                _check_correlation_value(attr, value, (str,))
                terms.append(Binary("=", Property("sys", column), Literal(value)))
        for key, value in self.properties.items():
            if not isinstance(key, str) or not is_utf8(key):
                raise InvalidOperationError(
                    f"correlation filter property name {key!r:.80} is not a str UTF-8 can store "
                    "(S15.3)")
            _check_correlation_value(key, value, (str, int, float, bool))
            terms.append(Binary("=", Property("user", key), Literal(value)))
        if not terms:
            raise InvalidOperationError(
                "a correlation filter needs at least one field or property (S15.3)")
        tree = terms[0]
        for term in terms[1:]:
            tree = Logical("and", tree, term)
        return tree

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"type": "correlation", "properties": self.properties}
        doc.update({a: getattr(self, a) for a in _CORRELATION_FIELDS
                    if getattr(self, a) is not None})
        return doc

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __repr__(self) -> str:
        return f"CorrelationRuleFilter({self.to_json()!r})"

    __hash__ = None  # type: ignore[assignment]


def _check_correlation_value(name: str, value: object, kinds: tuple[type, ...]) -> None:
    """S15.3: a system field is a str, a user property a str, int (64-bit), float or bool;
    anything else would only fail later, when a send is matched in Spark."""
    allowed = ", ".join(k.__name__ for k in kinds)
    if not isinstance(value, kinds) or (isinstance(value, str) and not is_utf8(value)):
        raise InvalidOperationError(
            f"correlation filter {name!r}={value!r:.80}: allowed types are {allowed}, text "
            "that UTF-8 can store (S15.3)")
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise InvalidOperationError(
            f"correlation filter {name!r}={value}: outside 64-bit integers (S15.3)")


RuleFilter = SqlRuleFilter | CorrelationRuleFilter


class SqlRuleAction:
    """``SET`` / ``REMOVE`` statements applied to the rule's own copy (S15.6)."""

    def __init__(self, sql_expression: str, parameters: dict[str, Any] | None = None) -> None:
        self.sql_expression = sql_expression
        self.parameters = check_parameters(parameters)

    def statements(self) -> tuple[Action, ...]:
        return parse_action(self.sql_expression, self.parameters)

    def to_json(self) -> dict[str, Any]:
        return {"sql_expression": self.sql_expression, "parameters": self.parameters}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __repr__(self) -> str:
        return f"SqlRuleAction({self.sql_expression!r})"

    __hash__ = None  # type: ignore[assignment]


def describe_filter(rule_filter: RuleFilter) -> str:
    """A filter in one line for a person (the CLI's rule list, the explorer's rules)."""
    doc = rule_filter.to_json()
    if doc["type"] == "sql":
        return f"SQL: {doc['sql_expression']}"
    if doc["type"] in ("true", "false"):
        return str(doc["type"]).capitalize() + "Filter"
    fields = {k: v for k, v in doc.items() if k not in ("type", "properties") and v is not None}
    return f"Correlation: {fields} {doc['properties'] or ''}".strip()


def filter_from_json(doc: dict[str, Any]) -> RuleFilter:
    kind = doc.get("type")
    if kind == "true":
        return TrueRuleFilter()
    if kind == "false":
        return FalseRuleFilter()
    if kind == "sql":
        return SqlRuleFilter(doc["sql_expression"], doc.get("parameters"))
    fields = {a: doc.get(a) for a in _CORRELATION_FIELDS}
    return CorrelationRuleFilter(**fields, properties=doc.get("properties"))


@dataclass
class RuleProperties:
    """A rule of a subscription, as ``azure.servicebus.management.RuleProperties``."""

    name: str
    filter: RuleFilter = field(default_factory=TrueRuleFilter)
    action: SqlRuleAction | None = None
    created_at_utc: datetime = field(default_factory=utcnow)

    def check(self) -> RuleProperties:
        """Refuse a bad name, filter or action now, at creation (S15.7)."""
        validate_short_name(self.name, "rule name")
        if not isinstance(self.filter, (SqlRuleFilter, CorrelationRuleFilter)):
            raise InvalidOperationError(
                f"rule {self.name!r}: filter {self.filter!r} is not a SqlRuleFilter, "
                "CorrelationRuleFilter, TrueRuleFilter or FalseRuleFilter (S15.7)")
        if self.action is not None and not isinstance(self.action, SqlRuleAction):
            raise InvalidOperationError(
                f"rule {self.name!r}: action {self.action!r} is not a SqlRuleAction (S15.7)")
        self.filter.tree()
        if self.action is not None:
            self.action.statements()
        return self

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "filter": self.filter.to_json(),
                "action": self.action.to_json() if self.action else None,
                "created_at_utc": self.created_at_utc.isoformat()}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RuleProperties:
        action = doc.get("action")
        return cls(name=doc["name"], filter=filter_from_json(doc["filter"]),
                   action=SqlRuleAction(action["sql_expression"], action.get("parameters"))
                   if action else None,
                   created_at_utc=datetime.fromisoformat(doc["created_at_utc"]))
