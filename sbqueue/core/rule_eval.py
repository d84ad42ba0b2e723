"""Evaluating a rule tree on one message in Python (SPEC S15.2-S15.6).

Values are None (unknown: missing or null), bool, int (64-bit), float or str. The rules of
S15.5: any comparison, arithmetic, LIKE or IN with an unknown is unknown; AND / OR / NOT are
three-valued; ``IS NULL`` holds for missing or null; only TRUE matches. Strings are never
converted to numbers, and a comparison between different kinds is unknown; int and float
compare numerically; bools compare only for (in)equality. Integer ``/`` truncates and ``%``
takes the dividend's sign, as in C#; a result beyond 64 bits, or a division by zero, is
unknown. ``engine.topics.rules`` compiles the same tree with the same rules; one test table
runs against both.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sbqueue.core.rule_syntax import (
    SYSTEM_PROPERTIES,
    Action,
    Binary,
    Exists,
    InList,
    IsNull,
    Like,
    Literal,
    Logical,
    NewId,
    Node,
    Not,
    Property,
    Remove,
    Set,
    Unary,
)
from sbqueue.store.variant import java_double

__all__ = ["RuleMessage", "apply_actions", "evaluate", "like_regex", "matches", "message_view"]

_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


@dataclass
class RuleMessage:
    """What a rule sees of a message: its system fields (``message_id``, ``subject`` ...)
    and its user properties (application properties, names matched case-insensitively)."""

    system: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)

    def _key(self, name: str) -> str | None:
        lowered = name.lower()
        return next((k for k in self.user if k.lower() == lowered), None)

    def lookup(self, prop: Property) -> tuple[bool, Any]:
        """(present, value) of a property."""
        if prop.scope == "sys":
            value = self.system.get(prop.name)
            return value is not None, value
        key = self._key(prop.name)
        return (key is not None, self.user[key] if key is not None else None)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if _number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"  # datetimes and the like: only IS NULL and EXISTS see them


def _compare(op: str, a: Any, b: Any) -> bool | None:
    kind = _kind(a)
    if kind is None or kind != _kind(b) or kind == "other":
        return None
    if type(a) is not type(b):  # an int and a float compare as doubles, as in C# and Spark
        a, b = float(a), float(b)
    if op == "=":
        return bool(a == b)
    if op in ("<>", "!="):
        return bool(a != b)
    if kind == "bool":
        return None
    return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])


def _fit(value: Any) -> Any:
    if isinstance(value, int) and not _INT_MIN <= value <= _INT_MAX:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _arith(op: str, a: Any, b: Any) -> Any:
    if op == "+" and isinstance(a, str) and isinstance(b, str):
        return a + b
    if not (_number(a) and _number(b)):
        return None
    if op in ("/", "%") and b == 0:
        return None
    both_int = isinstance(a, int) and isinstance(b, int)
    if op == "/" and both_int:  # truncated toward zero
        quotient = abs(a) // abs(b)
        return _fit(quotient if (a < 0) == (b < 0) else -quotient)
    if op == "%" and both_int:  # the dividend's sign
        remainder = abs(a) % abs(b)
        return remainder if a >= 0 else -remainder
    if op == "%" and math.isinf(a):  # NaN in IEEE (fmod raises): unknown
        return None
    if op in ("/", "%"):
        return _fit(a / b if op == "/" else math.fmod(a, b))
    return _fit({"+": a + b, "-": a - b, "*": a * b}[op])


def like_regex(pattern: str, escape: str | None) -> str:
    r"""The anchored regular expression of a LIKE pattern (``%`` any run, ``_`` one char),
    for DOTALL matching. It ends with ``(?!.)``, the end of the text in both Python's and
    Java's regular expressions: ``$`` also matches before a final line terminator (in
    Python ``\n``; in Java ``\n``, ``\r``, ``\r\n``, ``\u0085``, ``\u2028``, ``\u2029``)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return "^" + "".join(out) + "(?!.)"


def _and(a: Any, b: Any) -> bool | None:
    a, b = (v if isinstance(v, bool) else None for v in (a, b))
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: Any, b: Any) -> bool | None:
    a, b = (v if isinstance(v, bool) else None for v in (a, b))
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _in(node: InList, message: RuleMessage) -> bool | None:
    value = evaluate(node.operand, message)
    if value is None:
        return None
    found: bool | None = False
    for item in node.items:
        equal = _compare("=", value, evaluate(item, message))
        if equal is True:
            found = True
            break
        if equal is None:
            found = None
    return found if not node.negated or found is None else not found


def evaluate(node: Node, message: RuleMessage) -> Any:
    """The value of ``node`` for ``message``: None is unknown."""
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Property):
        return message.lookup(node)[1]
    if isinstance(node, NewId):
        return str(uuid.uuid4())
    if isinstance(node, Unary):
        value = evaluate(node.operand, message)
        if not _number(value):
            return None
        return _fit(-value) if node.op == "-" else value  # +x is x, as in Spark
    if isinstance(node, Binary):
        a, b = evaluate(node.left, message), evaluate(node.right, message)
        if node.op in ("+", "-", "*", "/", "%"):
            return _arith(node.op, a, b)
        return _compare(node.op, a, b)
    if isinstance(node, Logical):
        a, b = evaluate(node.left, message), evaluate(node.right, message)
        return _and(a, b) if node.op == "and" else _or(a, b)
    if isinstance(node, Not):
        value = evaluate(node.operand, message)
        return (not value) if isinstance(value, bool) else None
    if isinstance(node, IsNull):
        return (evaluate(node.operand, message) is None) != node.negated
    if isinstance(node, Exists):
        return message.lookup(node.prop)[0]
    if isinstance(node, InList):
        return _in(node, message)
    if isinstance(node, Like):
        value = evaluate(node.operand, message)
        if not isinstance(value, str):
            return None
        hit = re.match(like_regex(node.pattern, node.escape), value, re.DOTALL) is not None
        return hit != node.negated
    raise TypeError(f"not a rule node: {node!r}")


def matches(node: Node, message: RuleMessage) -> bool:
    """Only TRUE matches (S15.5)."""
    return evaluate(node, message) is True


def apply_actions(actions: tuple[Action, ...], message: RuleMessage) -> RuleMessage:
    """The message as its rule's copy sees it after ``SET`` and ``REMOVE`` (S15.6); each
    statement sees the ones before it."""
    copy = RuleMessage(dict(message.system), dict(message.user))
    for action in actions:
        prop = action.prop
        if prop.scope == "sys":
            copy.system[prop.name] = None if isinstance(action, Remove) else _text(
                evaluate(action.value, copy))
            continue
        key = copy._key(prop.name)
        if isinstance(action, Set):
            copy.user[prop.name if key is None else key] = evaluate(action.value, copy)
        elif key is not None:
            del copy.user[key]
    return copy


def _text(value: Any) -> str | None:
    """A system property is a string: other values are set as their text, as Spark casts
    them (a double as Java writes it: ``1.0E20``, not ``1e+20``)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return java_double(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def message_view(fields: Mapping[str, Any], properties: Mapping[str, Any] | None) -> RuleMessage:
    """A ``RuleMessage`` from message fields and application properties."""
    system = {f: fields.get(f) for f in set(SYSTEM_PROPERTIES.values())}
    return RuleMessage(system, dict(properties or {}))
