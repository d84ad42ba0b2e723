"""The Service Bus SQL filter and action language (SPEC S15.4, S15.6) as a syntax tree.

Text is parsed by a lark LALR grammar into frozen nodes; nothing else ever reads the text,
so a filter is data and can do nothing but evaluate (S15.7). ``@parameters`` are replaced
by their values while the tree is built, so an unknown parameter is refused at rule
creation, like a syntax error, with its position. The same tree is evaluated in Python
(``core.rule_eval``) and compiled to one Spark Column (``engine.topics.rules``).
Why lark: docs/decisions/009-topics.md.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError

from sbqueue.core.sizes import is_utf8
from sbqueue.exceptions import InvalidOperationError

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "MAX_NESTING",
    "SYSTEM_PROPERTIES",
    "Action",
    "Binary",
    "Exists",
    "InList",
    "IsNull",
    "Like",
    "Literal",
    "Logical",
    "NewId",
    "Node",
    "Not",
    "Property",
    "Remove",
    "Set",
    "Unary",
    "check_parameters",
    "parse_action",
    "parse_filter",
]

MAX_EXPRESSION_LENGTH = 1024  # S15.4
# Deeper parse trees are refused (S15.7): building, evaluating and compiling a tree recurse
# per level, and 1024 characters reach ~500 levels (``------x``), past Python's recursion
# limit. 200 takes any chain of ORed comparisons that fits in 1024 characters (<= 146).
MAX_NESTING = 200
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
# S15.4: the system properties a rule may name, by lower-cased name -> message field.
SYSTEM_PROPERTIES = {
    "messageid": "message_id", "correlationid": "correlation_id", "to": "to",
    "replyto": "reply_to", "label": "subject", "subject": "subject",
    "sessionid": "session_id", "replytosessionid": "reply_to_session_id",
    "contenttype": "content_type",
}

_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr | or_expr _OR and_expr -> or_
?and_expr: not_expr | and_expr _AND not_expr -> and_
?not_expr: predicate | _NOT not_expr -> not_
?predicate: sum
    | sum COMPARE sum -> compare
    | sum _EQUAL sum -> equal
    | sum _IS _NULL -> is_null
    | sum _IS _NOT _NULL -> is_not_null
    | sum _IN "(" items ")" -> in_
    | sum _NOT _IN "(" items ")" -> not_in
    | sum _LIKE sum [_ESCAPE sum] -> like
    | sum _NOT _LIKE sum [_ESCAPE sum] -> not_like
    | _EXISTS "(" prop ")" -> exists
items: sum ("," sum)*
?sum: product | sum ADDOP product -> binary
?product: unary | product MULOP unary -> binary
?unary: atom | ADDOP unary -> unary
?atom: INT -> int_
    | DECIMAL -> decimal
    | STRING -> string
    | _TRUE -> true
    | _FALSE -> false
    | _NULL -> null
    | PARAM -> param
    | NAME "(" [or_expr] ")" -> call
    | prop
    | "(" or_expr ")"
prop: name ("." name)?
name: NAME | BRACKETED | QUOTED

actions: action (";" action)* ";"?
action: _SET prop _EQUAL or_expr -> set_
    | _REMOVE prop -> remove

_OR: /or\b/i
_AND: /and\b/i
_NOT: /not\b/i
_IS: /is\b/i
_NULL: /null\b/i
_IN: /in\b/i
_LIKE: /like\b/i
_ESCAPE: /escape\b/i
_EXISTS: /exists\b/i
_TRUE: /true\b/i
_FALSE: /false\b/i
_SET: /set\b/i
_REMOVE: /remove\b/i
_EQUAL: "="
COMPARE: "<>" | "!=" | ">=" | "<=" | ">" | "<"
ADDOP: "+" | "-"
MULOP: "*" | "/" | "%"
DECIMAL.2: /(\d+\.\d*|\.\d+)([eE][+-]?\d+)?|\d+[eE][+-]?\d+/
INT: /\d+/
STRING: /'([^']|'')*'/
PARAM: /@[A-Za-z_][A-Za-z0-9_]*/
NAME: /(?!(KEYWORDS)\b)[A-Za-z_$][A-Za-z0-9_$]*/i
BRACKETED: /\[[^\]]*\]/
QUOTED: /"([^"]|"")*"/
%ignore /\s+/
""".replace("KEYWORDS", "or|and|not|is|null|in|like|escape|exists|true|false|set|remove")


class Node:
    """A node of a filter or action tree."""


@dataclass(frozen=True)
class Literal(Node):
    value: Any  # int, float, str, bool or None


@dataclass(frozen=True)
class Property(Node):
    scope: str  # "sys" or "user"
    name: str  # user: as written (matched case-insensitively); sys: the message field


@dataclass(frozen=True)
class Unary(Node):
    op: str  # "+" or "-"
    operand: Node


@dataclass(frozen=True)
class Binary(Node):
    op: str  # + - * / % = <> != > >= < <=
    left: Node
    right: Node


@dataclass(frozen=True)
class Logical(Node):
    op: str  # "and" or "or"
    left: Node
    right: Node


@dataclass(frozen=True)
class Not(Node):
    operand: Node


@dataclass(frozen=True)
class IsNull(Node):
    operand: Node
    negated: bool = False


@dataclass(frozen=True)
class InList(Node):
    operand: Node
    items: tuple[Node, ...]
    negated: bool = False


@dataclass(frozen=True)
class Like(Node):
    operand: Node
    pattern: str
    escape: str | None = None
    negated: bool = False


@dataclass(frozen=True)
class Exists(Node):
    prop: Property


@dataclass(frozen=True)
class NewId(Node):
    """``newid()``: a new uuid string each evaluation."""


@dataclass(frozen=True)
class Set:
    prop: Property
    value: Node


@dataclass(frozen=True)
class Remove:
    prop: Property


Action = Set | Remove


class _RuleError(Exception):
    """A semantic error found while building the tree, with its token for the position."""

    def __init__(self, message: str, token: Token | None) -> None:
        super().__init__(message)
        self.token = token


def _unquote(token: Token) -> str:
    text = str(token)
    if token.type == "BRACKETED":
        return text[1:-1]
    if token.type == "QUOTED":
        return text[1:-1].replace('""', '"')
    return text


@v_args(inline=True)
class _Build(Transformer[Token, Any]):
    """Parse tree -> ``Node``; parameters are substituted here."""

    def __init__(self, parameters: dict[str, Any]) -> None:
        super().__init__()
        self.parameters = {k.lower().lstrip("@"): v for k, v in parameters.items()}

    def int_(self, token: Token) -> Literal:
        value = int(token)
        if value > _INT_MAX:
            raise _RuleError(f"integer {token} does not fit in 64 bits", token)
        return Literal(value)

    def decimal(self, token: Token) -> Literal:
        return Literal(float(token))

    def string(self, token: Token) -> Literal:
        return Literal(str(token)[1:-1].replace("''", "'"))

    def true(self) -> Literal:
        return Literal(True)

    def false(self) -> Literal:
        return Literal(False)

    def null(self) -> Literal:
        return Literal(None)

    def param(self, token: Token) -> Literal:
        key = str(token)[1:].lower()
        if key not in self.parameters:
            raise _RuleError(f"parameter {token} has no value", token)
        value = self.parameters[key]
        if not isinstance(value, (int, float, str, bool)) and value is not None:
            raise _RuleError(f"parameter {token} is a {type(value).__name__}; "
                             "allowed: string, int, float, bool", token)
        if isinstance(value, int) and not _INT_MIN <= value <= _INT_MAX:  # as a literal
            raise _RuleError(f"parameter {token} = {value} does not fit in 64 bits", token)
        return Literal(value)

    def name(self, token: Token) -> Token:
        return token

    def prop(self, first: Token, second: Token | None = None) -> Property:
        if second is None:
            return Property("user", _unquote(first))
        scope = _unquote(first).lower()
        if scope == "user":
            return Property("user", _unquote(second))
        if scope == "sys":
            field = SYSTEM_PROPERTIES.get(_unquote(second).lower())
            if field is None:
                raise _RuleError(f"sys.{second} is not a system property a rule can use "
                                 f"({', '.join(sorted(SYSTEM_PROPERTIES))})", second)
            return Property("sys", field)
        raise _RuleError(f"unknown scope {first!s}: use sys or user", first)

    def call(self, name: Token, argument: Node | None = None) -> Node:
        fn = str(name).lower()
        if fn == "newid" and argument is None:
            return NewId()
        if fn in ("property", "p") and isinstance(argument, Literal) \
                and isinstance(argument.value, str):
            return Property("user", argument.value)
        raise _RuleError(f"unknown function or wrong argument: {name}(...); known: newid(), "
                         "property('name'), p('name')", name)

    def unary(self, op: Token, operand: Node) -> Node:
        if op == "-" and isinstance(operand, Literal) and isinstance(operand.value, (int, float)) \
                and not isinstance(operand.value, bool) and operand.value != _INT_MIN:
            return Literal(-operand.value)  # -(-2**63) would leave 64 bits: unknown, as Unary
        return Unary(str(op), operand)

    def binary(self, left: Node, op: Token, right: Node) -> Binary:
        return Binary(str(op), left, right)

    def compare(self, left: Node, op: Token, right: Node) -> Binary:
        return Binary(str(op), left, right)

    def equal(self, left: Node, right: Node) -> Binary:
        return Binary("=", left, right)

    def or_(self, left: Node, right: Node) -> Logical:
        return Logical("or", left, right)

    def and_(self, left: Node, right: Node) -> Logical:
        return Logical("and", left, right)

    def not_(self, operand: Node) -> Not:
        return Not(operand)

    def is_null(self, operand: Node) -> IsNull:
        return IsNull(operand)

    def is_not_null(self, operand: Node) -> IsNull:
        return IsNull(operand, negated=True)

    def items(self, *nodes: Node) -> tuple[Node, ...]:
        return nodes

    def in_(self, operand: Node, items: tuple[Node, ...]) -> InList:
        return InList(operand, items)

    def not_in(self, operand: Node, items: tuple[Node, ...]) -> InList:
        return InList(operand, items, negated=True)

    def _like(self, operand: Node, pattern: Node, escape: Node | None, negated: bool) -> Like:
        if not (isinstance(pattern, Literal) and isinstance(pattern.value, str)):
            raise _RuleError("LIKE takes a string pattern", None)
        esc = None
        if escape is not None:
            if not (isinstance(escape, Literal) and isinstance(escape.value, str)
                    and len(escape.value) == 1):
                raise _RuleError("ESCAPE takes one character in quotes", None)
            esc = escape.value
        return Like(operand, pattern.value, esc, negated)

    def like(self, operand: Node, pattern: Node, escape: Node | None = None) -> Like:
        return self._like(operand, pattern, escape, False)

    def not_like(self, operand: Node, pattern: Node, escape: Node | None = None) -> Like:
        return self._like(operand, pattern, escape, True)

    def exists(self, prop: Property) -> Exists:
        return Exists(prop)

    def set_(self, prop: Property, value: Node) -> Set:
        return Set(prop, value)

    def remove(self, prop: Property) -> Remove:
        return Remove(prop)

    def actions(self, *actions: Action) -> tuple[Action, ...]:
        return actions


@functools.cache
def _parser(start: str) -> Lark:
    return Lark(_GRAMMAR, start=start, parser="lalr", maybe_placeholders=True)


def _nesting(tree: Tree[Token]) -> int:
    """The depth of a parse tree, measured without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))
    return deepest


def _refuse(kind: str, text: str, message: str, line: int | None, column: int | None
            ) -> InvalidOperationError:
    where = f" at line {line}, column {column}" if line is not None else ""
    return InvalidOperationError(f"invalid SQL {kind} {text!r}{where}: {message} (S15.7)")


def check_parameters(parameters: object) -> dict[str, Any]:
    """A filter's or action's ``@parameters`` as a dict (S15.7): a list, a str or a name that
    is not a str would otherwise fail as a raw TypeError, ValueError or AttributeError."""
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping) or not all(isinstance(k, str) for k in parameters):
        raise InvalidOperationError(
            f"SQL parameters {parameters!r:.80} are not a map from str names to values (S15.7)")
    return dict(parameters)


def _parse(kind: str, start: str, text: object, parameters: dict[str, Any] | None) -> Any:
    if not isinstance(text, str) or not text.strip():
        raise InvalidOperationError(f"SQL {kind} {text!r}: an expression is required (S15.7)")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise InvalidOperationError(f"SQL {kind} of {len(text)} characters: at most "
                                    f"{MAX_EXPRESSION_LENGTH} (S15.4)")
    if not is_utf8(text):
        raise InvalidOperationError(
            f"SQL {kind} {text!r} holds a lone surrogate; UTF-8 cannot store it (S15.7)")
    values = check_parameters(parameters)
    try:
        tree = _parser(start).parse(text)
        if _nesting(tree) > MAX_NESTING:
            raise _refuse(kind, text, f"nested more than {MAX_NESTING} levels deep", None, None)
        return _Build(values).transform(tree)
    except UnexpectedCharacters as exc:
        raise _refuse(kind, text, f"unexpected character {text[exc.pos_in_stream or 0]!r}",
                      exc.line, exc.column) from None
    except UnexpectedEOF:
        raise _refuse(kind, text, "the expression ends too early", None, None) from None
    except UnexpectedInput as exc:
        token = getattr(exc, "token", None)
        shown = "end of text" if token is None or token.type == "$END" else repr(str(token))
        raise _refuse(kind, text, f"unexpected {shown}", exc.line, exc.column) from None
    except VisitError as exc:
        cause = exc.orig_exc
        if isinstance(cause, _RuleError):
            token = cause.token
            raise _refuse(kind, text, str(cause), getattr(token, "line", None),
                          getattr(token, "column", None)) from None
        raise


def parse_filter(text: object, parameters: dict[str, Any] | None = None) -> Node:
    """The tree of a SQL filter; InvalidOperationError with the position if it is not one."""
    node: Node = _parse("filter", "start", text, parameters)
    return node


def parse_action(text: object, parameters: dict[str, Any] | None = None) -> tuple[Action, ...]:
    """The statements of a SQL action (``SET p = e; REMOVE q``), S15.6."""
    actions: tuple[Action, ...] = _parse("action", "actions", text, parameters)
    return actions
