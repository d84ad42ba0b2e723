"""The Service Bus emulator's ``Config.json`` (SPEC S15.8): read, checked whole, then
applied to a namespace, creating what is missing.

The file is JSON with ``//`` comments. ``UserConfig.Namespaces[]`` hold ``Queues``,
``Topics`` (with ``Subscriptions``, with ``Rules``), each ``{"Name", "Properties"}`` with
PascalCase properties and ISO-8601 durations. Every element is checked before anything is
created (properties with the admin client's own rules, filters and actions parsed), so a
bad file is refused with the path of its bad element (``Topics[0].Subscriptions[1].Rules[0]
.Properties.SqlFilter.SqlExpression``) and creates nothing. A namespace's ``Name`` is not
used: the namespace is the one the client opened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sbqueue.core.names import name_key, validate_entity_path, validate_short_name
from sbqueue.core.properties import (
    QueueProperties,
    SubscriptionProperties,
    TopicProperties,
    build_properties,
)
from sbqueue.core.rules import (
    CorrelationRuleFilter,
    RuleFilter,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
)
from sbqueue.exceptions import InvalidOperationError

__all__ = ["ConfigPlan", "read_config", "strip_comments"]

_FORWARDS = ("forward_to", "forward_dead_lettered_messages_to")
_CORRELATION_KEYS = {"CorrelationId": "correlation_id", "MessageId": "message_id", "To": "to",
                     "ReplyTo": "reply_to", "Label": "label", "SessionId": "session_id",
                     "ReplyToSessionId": "reply_to_session_id",
                     "ContentType": "content_type", "Properties": "properties"}


def strip_comments(text: str) -> str:
    """``text`` without ``//`` comments (outside strings), keeping line numbers."""
    out: list[str] = []
    in_string = escaped = False
    i = 0
    while i < len(text):
        ch = text[i]
        if in_string:  # the character after a backslash is escaped, a quote among them
            in_string = escaped or ch != '"'
            escaped = not escaped and ch == "\\"
        elif ch == '"':
            in_string = True
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class _Where:
    """A path into the file, for error messages."""

    def __init__(self, path: str = "UserConfig") -> None:
        self.path = path

    def __truediv__(self, part: str | int) -> _Where:
        return _Where(f"{self.path}[{part}]" if isinstance(part, int) else f"{self.path}.{part}")

    def fail(self, message: str) -> InvalidOperationError:
        return InvalidOperationError(f"Config.json {self.path}: {message} (S15.8)")


def _object(value: Any, where: _Where) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.fail(f"expected an object, got {type(value).__name__}")
    return value


def _list(parent: dict[str, Any], key: str, where: _Where) -> list[Any]:
    value = parent.get(key, [])
    if not isinstance(value, list):
        raise (where / key).fail(f"expected a list, got {type(value).__name__}")
    return value


def _name(element: dict[str, Any], where: _Where,
          check: Callable[[object, str], str] = validate_short_name) -> str:
    """The element's ``Name``, checked now (S1.7): a bad name found while creating would
    leave the elements before it created."""
    name = element.get("Name")
    if not isinstance(name, str) or not name:
        raise (where / "Name").fail(f"a name is required, got {name!r:.80}")
    try:
        return check(name, "name")
    except InvalidOperationError as exc:
        raise (where / "Name").fail(str(exc)) from None


def _properties(element: dict[str, Any], where: _Where) -> dict[str, Any]:
    props = _object(element.get("Properties", {}), where / "Properties")
    return {_snake(k): (None if v == "" and _snake(k) in _FORWARDS else v)
            for k, v in props.items()}


@dataclass
class ConfigPlan:
    """What a file asks for, checked: entities in creation order, forwarding set after."""

    queues: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    topics: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    subscriptions: list[tuple[str, str, dict[str, Any], list[RuleProperties]]] = field(
        default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)  # name key -> "queue" or "topic"

    def _claim(self, name: str, kind: str, where: _Where) -> None:
        """Queues and topics share one name space, without case (S1.7): a file naming both
        would have one created and the other refused part way."""
        other = self.kinds.setdefault(name_key(name), kind)
        if other != kind:
            raise (where / "Name").fail(f"{name!r} is also the name of a {other} (S1.7)")

    def add_queue(self, element: dict[str, Any], where: _Where, check: Any) -> None:
        name = _name(element, where, validate_entity_path)
        props = _properties(element, where)
        check(QueueProperties, name, props, where / "Properties")
        self._claim(name, "queue", where)
        self.queues.append((name, props))

    def add_topic(self, element: dict[str, Any], where: _Where, check: Any) -> None:
        name = _name(element, where, validate_entity_path)
        props = _properties(element, where)
        check(TopicProperties, name, props, where / "Properties")
        self._claim(name, "topic", where)
        self.topics.append((name, props))
        for i, sub in enumerate(_list(element, "Subscriptions", where)):
            at = where / "Subscriptions" / i
            sub = _object(sub, at)
            sub_name, sub_props = _name(sub, at), _properties(sub, at)
            check(SubscriptionProperties, sub_name, sub_props, at / "Properties")
            self.subscriptions.append((name, sub_name, sub_props, _rules(sub, at)))


def _rules(sub: dict[str, Any], at: _Where) -> list[RuleProperties]:
    """A subscription's rules, their names unique without case (S1.7): a second rule of one
    name would be refused after the subscription was created."""
    rules: list[RuleProperties] = []
    for k, element in enumerate(_list(sub, "Rules", at)):
        rule = _rule(_object(element, at / "Rules" / k), at / "Rules" / k)
        if any(name_key(r.name) == name_key(rule.name) for r in rules):
            raise (at / "Rules" / k / "Name").fail(f"a second rule named {rule.name!r} (S1.7)")
        rules.append(rule)
    return rules


def _filter(props: dict[str, Any], where: _Where) -> RuleFilter:
    kind = props.get("FilterType", "Sql")
    if kind == "Sql":
        sql = _object(props.get("SqlFilter"), where / "SqlFilter")
        return SqlRuleFilter(sql.get("SqlExpression"), sql.get("Parameters"))  # type: ignore[arg-type]
    if kind == "Correlation":
        corr = _object(props.get("CorrelationFilter"), where / "CorrelationFilter")
        unknown = sorted(set(corr) - set(_CORRELATION_KEYS))
        if unknown:
            raise (where / "CorrelationFilter").fail(
                f"unknown field(s) {', '.join(unknown)}; known: {', '.join(_CORRELATION_KEYS)}")
        return CorrelationRuleFilter(**{_CORRELATION_KEYS[k]: v for k, v in corr.items()})
    raise (where / "FilterType").fail(f"{kind!r} is not Sql or Correlation")


def _rule(element: dict[str, Any], where: _Where) -> RuleProperties:
    name = _name(element, where)
    props = _object(element.get("Properties", {}), where / "Properties")
    action = props.get("Action")
    try:
        rule_filter = _filter(props, where / "Properties")
        sql_action = None
        if action is not None:
            body = _object(action, where / "Properties" / "Action")
            sql_action = SqlRuleAction(body.get("SqlExpression"),  # type: ignore[arg-type]
                                       body.get("Parameters"))
        return RuleProperties(name, rule_filter, sql_action).check()
    except InvalidOperationError as exc:
        if "Config.json" in str(exc):
            raise
        raise (where / "Properties").fail(str(exc)) from None


def _parse_json(text: str, path: str | Path) -> Any:
    """The document; not JSON, or JSON that ``json`` cannot take (nested past the recursion
    limit, an integer of more than 4300 digits), is refused with the file's path."""
    try:
        return json.loads(strip_comments(text))
    except json.JSONDecodeError as exc:
        raise InvalidOperationError(
            f"Config.json {path}: not JSON at line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg} (S15.8)") from None
    except (ValueError, RecursionError) as exc:
        raise InvalidOperationError(
            f"Config.json {path}: JSON that cannot be read: {str(exc)[:80]} (S15.8)") from None


def read_config(path: str | Path, check: Any) -> ConfigPlan:
    """Parse and check the file; ``check(kind, name, props, where)`` validates properties
    (raising InvalidOperationError). Nothing is created here."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidOperationError(f"Config.json {path}: cannot read it: {exc} (S15.8)") from None
    doc = _parse_json(text, path)
    root = _Where()
    user = _object(_object(doc, _Where("(file)")).get("UserConfig"), root)
    plan = ConfigPlan()
    for n, namespace in enumerate(_list(user, "Namespaces", root)):
        at = root / "Namespaces" / n
        namespace = _object(namespace, at)
        for i, queue in enumerate(_list(namespace, "Queues", at)):
            plan.add_queue(_object(queue, at / "Queues" / i), at / "Queues" / i, check)
        for i, topic in enumerate(_list(namespace, "Topics", at)):
            plan.add_topic(_object(topic, at / "Topics" / i), at / "Topics" / i, check)
    return plan


def property_checker(sku: Any, messaging_partitions: int) -> Any:
    """A ``check`` for ``read_config``: the admin client's property rules, without creating."""
    def check(kind: Any, name: str, props: dict[str, Any], where: _Where) -> None:
        try:
            build_properties(kind, name, props, sku=sku,
                             messaging_partitions=messaging_partitions,
                             parent_partitions=1 if kind is SubscriptionProperties else None)
        except InvalidOperationError as exc:
            raise where.fail(str(exc)) from None

    return check
