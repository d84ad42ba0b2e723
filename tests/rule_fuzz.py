"""Hypothesis strategies for the rule language (SPEC S15.4-S15.7), shared by
tests/unit/test_rule_fuzz.py (parser and Python evaluator) and
tests/integration/test_rule_fuzz_spark.py (the Spark projection against the Python evaluator).

A filter is drawn twice at once: as the tree ``core.rule_syntax`` must build from it, and as
tokens spelled in one of the ways S15.4 allows (keywords in any case; names plain,
``[bracketed]``, ``"quoted"``, ``user.``/``sys.`` prefixed or through ``property()``/``p()``;
``@parameters``; integers, decimals and exponents; as few parentheses as the precedence
needs, sometimes more; any whitespace). The parser is then checked against the tree and the
two evaluators against each other on drawn property maps.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from sbqueue.core.rule_syntax import (
    MAX_EXPRESSION_LENGTH,
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

# The grammar's precedence levels, loosest first; a child looser than its slot is
# parenthesized (a comparison's operands are sums, so ``a = b = c`` needs parentheses).
OR, AND, NOT, PREDICATE, SUM, PRODUCT, UNARY, ATOM = range(1, 9)

INT_MIN, INT_MAX = -(2**63), 2**63 - 1

# User property names: distinct without case (see ``user_properties``); some need
# [brackets] or "quotes" (a space, a keyword, a quote, letters beyond ASCII).
USER_NAMES = ("a", "color", "n", "x_1", "$d", "my prop", "or", 'q"t', "ünï")
SYSTEM_NAMES = {"MessageId": "message_id", "CorrelationId": "correlation_id", "To": "to",
                "ReplyTo": "reply_to", "Label": "subject", "Subject": "subject",
                "SessionId": "session_id", "ReplyToSessionId": "reply_to_session_id",
                "ContentType": "content_type"}
SYSTEM_FIELDS = sorted(set(SYSTEM_NAMES.values()))
KEYWORDS = frozenset(["or", "and", "not", "is", "null", "in", "like", "escape", "exists", "true",
                      "false", "set", "remove"])
_PLAIN = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
COMPARE_OPS = ("=", "<>", "!=", ">", ">=", "<", "<=")
ARITH_OPS = ("+", "-", "*", "/", "%")

# --- values: literals, parameters and property values draw from the same small pools, so
# that equal values (and kinds) meet often.

_EDGE_INTS = (0, 1, -1, 2, 5, -7, 10, 2**31, 2**53, 2**53 + 1, INT_MAX, INT_MIN, INT_MIN + 1)
ints = st.one_of(st.sampled_from(_EDGE_INTS), st.integers(-20, 20),
                 st.integers(INT_MIN, INT_MAX))
_EDGE_FLOATS = (0.0, -0.0, 0.5, 1.5, 2.0, -2.5, 5.0, 2.0**53, 2.0**63, 1e308, 5e-324)
finite_floats = st.one_of(st.sampled_from(_EDGE_FLOATS),
                          st.floats(allow_nan=False, allow_infinity=False))
# S2.3 allows any float as a property value, infinities and NaN included.
floats = st.one_of(finite_floats, st.sampled_from((math.inf, -math.inf, math.nan)))
_EDGE_TEXTS = ("", "a", "A", "Red", "red", "5", "50%", "a_b", "O'Brien", "a\n", "a\r",
               "a\u2028", "a\u0085", "%", "_", "!", "ß", "\U0001f600")
texts = st.one_of(st.sampled_from(_EDGE_TEXTS), st.text(alphabet="aA5%_!'\n\r ", max_size=5),
                  st.text(st.characters(codec="utf-8"), max_size=6))  # no lone surrogates
values = st.one_of(st.none(), st.booleans(), ints, floats, texts)
# Edge values more often, and pairs of values that differ in a way one evaluator may miss:
# an int and the nearest double, a text and itself with a line terminator after it.
edge_values = st.one_of(st.sampled_from(
    (None, True, False, *_EDGE_INTS, *_EDGE_FLOATS, math.inf, -math.inf, math.nan,
     *_EDGE_TEXTS)), values)
_TERMINATORS = ("", "\n", "\r", "\r\n", "\u2028", "\u0085", "x")
close_pairs = st.one_of(
    st.tuples(edge_values, edge_values),
    ints.map(lambda i: (i, float(i))),
    finite_floats.filter(lambda f: abs(f) < 2**63).map(lambda f: (f, int(f))),
    st.tuples(texts, st.sampled_from(_TERMINATORS)).map(lambda t: (t[0] + t[1], t[0])),
)


def cased(word: str) -> st.SearchStrategy[str]:
    """``word`` with each letter in either case (keywords and names ignore case, S15.4)."""
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda ups: "".join(c.upper() if up else c for c, up in zip(word, ups, strict=True)))


@st.composite
def user_properties(draw: st.DrawFn, value: st.SearchStrategy[Any] = values) -> dict[str, Any]:
    """Application properties: any subset of ``USER_NAMES``, each key in any case. Two keys
    equal but for case (``a`` and ``A``) are never drawn: which of them a rule sees is not
    specified (S15.4 only says names are compared without case), and the evaluators pick
    differently (Python the first key, Spark the first in the VARIANT's sorted order)."""
    names = draw(st.lists(st.sampled_from(USER_NAMES), unique=True))
    return {draw(cased(name)): draw(value) for name in names}


system_fields = st.fixed_dictionaries(
    {}, optional={f: st.one_of(st.none(), texts) for f in SYSTEM_FIELDS})
# (message fields, application properties or None)
messages = st.tuples(system_fields, st.one_of(st.none(), user_properties()))


# --- filters


@dataclass(frozen=True)
class Drawn:
    """A drawn (sub)expression: the tree the parser must build, its tokens, its level."""

    node: Node
    tokens: tuple[str, ...]
    level: int


@dataclass(frozen=True)
class FilterCase:
    text: str
    parameters: dict[str, Any]
    tree: Node
    tokens: tuple[str, ...]
    starts: tuple[int, ...]  # the offset of each token in ``text``


def negate(node: Node) -> Node:
    """``-node`` as the parser builds it: a number literal is folded to its negation unless
    that leaves 64 bits (``-@p`` with ``@p`` = -2**63 stays an overflowing, unknown
    ``Unary``)."""
    if isinstance(node, Literal) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool) and node.value != INT_MIN:
        return Literal(-node.value)
    return Unary("-", node)


def quote(text: str, mark: str = "'") -> str:
    return mark + text.replace(mark, mark * 2) + mark


def decimal_spellings(value: float) -> list[str]:
    """Ways to write a non-negative float as a DECIMAL token that reads back as it."""
    if math.isinf(value):
        return ["1E999", "9e400"]
    text = repr(value)  # '1.5', '1e-05', '1.5e+300', '2.0': all DECIMAL tokens
    spellings = [text, f"{value:.17e}", f"{value:.17E}"]
    if text.startswith("0."):
        spellings.append(text[1:])  # .5
    if text.endswith(".0"):
        spellings.append(text[:-1])  # 5.
    return spellings


class _Filters:
    """Draws one filter; ``parameters`` collects the values of the ``@p`` it wrote."""

    def __init__(self, draw: st.DrawFn, newid: bool, floats: st.SearchStrategy[float]) -> None:
        self.draw = draw
        self.with_newid = newid
        self.floats = floats
        self.parameters: dict[str, Any] = {}

    def kw(self, word: str) -> str:
        return self.draw(cased(word))

    def pick(self, options: Any) -> Any:
        return self.draw(st.sampled_from(options))

    def expr(self, depth: int, slot: int, kinds: tuple[str, ...] | None = None) -> Drawn:
        if kinds is None:
            kinds = ("literal", "literal", "property", "property", "exists")
            if self.with_newid:
                kinds += ("newid",)
            if depth > 0:
                kinds += ("unary", "sum", "product", "product", "compare", "compare",
                          "compare", "is_null", "in_", "like", "not_", "and_", "or_")
        build: Callable[[int], Drawn] = getattr(self, self.pick(kinds))
        got = build(max(depth - 1, 0))
        if got.level < slot or self.draw(st.integers(0, 15)) == 0:  # and now and then anyway
            return Drawn(got.node, ("(", *got.tokens, ")"), ATOM)
        return got

    # leaves

    def value(self) -> Any:
        return self.draw(st.one_of(st.none(), st.booleans(), ints, self.floats, texts))

    def parameter(self, value: Any) -> Drawn:
        name = f"p{len(self.parameters)}"
        self.parameters[name] = value
        return Drawn(Literal(value), ("@" + self.kw(name),), ATOM)

    def literal(self, depth: int) -> Drawn:
        value = self.value()
        unwritable = (isinstance(value, float) and math.isnan(value)) or value == INT_MIN
        if unwritable or self.draw(st.integers(0, 5)) == 0:
            return self.parameter(value)
        if value is None or isinstance(value, bool):
            return Drawn(Literal(value), (self.kw(str(value).lower().replace("none", "null")),),
                         ATOM)
        if isinstance(value, str):
            return Drawn(Literal(value), (quote(value),), ATOM)
        if isinstance(value, int):
            digits = str(abs(value))
            spelled = self.pick([digits, "00" + digits])
        else:
            spelled = self.pick(decimal_spellings(abs(value)))
        if value < 0 or (isinstance(value, float) and math.copysign(1, value) < 0):
            return Drawn(Literal(value), ("-", spelled), UNARY)  # folded by the parser
        return Drawn(Literal(value), (spelled,), ATOM)

    def name_token(self, name: str) -> str:
        styles = ["[]", '""']
        if _PLAIN.fullmatch(name) and name.lower() not in KEYWORDS:
            styles += ["plain", "plain"]
        style = self.pick(styles)
        return name if style == "plain" else f"[{name}]" if style == "[]" else quote(name, '"')

    def prop(self, calls: bool = True) -> Drawn:
        if self.draw(st.integers(0, 3)) == 0:
            written = self.pick(sorted(SYSTEM_NAMES))
            scope = self.pick(["sys", "SYS", "Sys", "[sys]", '"sys"'])
            return Drawn(Property("sys", SYSTEM_NAMES[written]),
                         (f"{scope}.{self.name_token(self.draw(cased(written.lower())))}",),
                         ATOM)
        name = self.draw(cased(self.pick(USER_NAMES)))
        style = self.pick(["name", "name", "user."] + (["call"] if calls else []))
        if style == "call":
            return Drawn(Property("user", name),
                         (self.kw(self.pick(["property", "p"])), "(", quote(name), ")"), ATOM)
        token = self.name_token(name)
        if style == "user.":
            token = self.pick(["user", "USER", "[user]", '"User"']) + "." + token
        return Drawn(Property("user", name), (token,), ATOM)

    def property(self, depth: int) -> Drawn:
        return self.prop()

    def newid(self, depth: int) -> Drawn:
        return Drawn(NewId(), (self.kw("newid"), "(", ")"), ATOM)

    def exists(self, depth: int) -> Drawn:
        prop = self.prop(calls=False)  # EXISTS takes a property name, not property('x')
        assert isinstance(prop.node, Property)
        return Drawn(Exists(prop.node), (self.kw("exists"), "(", *prop.tokens, ")"), PREDICATE)

    # compound nodes

    def unary(self, depth: int) -> Drawn:
        op = self.pick("+-")
        inner = self.expr(depth, UNARY)
        node = negate(inner.node) if op == "-" else Unary("+", inner.node)
        return Drawn(node, (op, *inner.tokens), UNARY)

    def _binary(self, depth: int, ops: str, slots: tuple[int, int], level: int) -> Drawn:
        op = self.pick(ops)
        left, right = self.expr(depth, slots[0]), self.expr(depth, slots[1])
        return Drawn(Binary(op, left.node, right.node), (*left.tokens, op, *right.tokens), level)

    def sum(self, depth: int) -> Drawn:
        return self._binary(depth, "+-", (SUM, PRODUCT), SUM)

    def product(self, depth: int) -> Drawn:
        return self._binary(depth, "*/%", (PRODUCT, UNARY), PRODUCT)

    def compare(self, depth: int) -> Drawn:
        op = self.pick(COMPARE_OPS)
        left, right = self.expr(depth, SUM), self.expr(depth, SUM)
        return Drawn(Binary(op, left.node, right.node), (*left.tokens, op, *right.tokens),
                     PREDICATE)

    def is_null(self, depth: int) -> Drawn:
        operand, negated = self.expr(depth, SUM), self.draw(st.booleans())
        words = (self.kw("is"), *([self.kw("not")] if negated else []), self.kw("null"))
        return Drawn(IsNull(operand.node, negated), (*operand.tokens, *words), PREDICATE)

    def in_(self, depth: int) -> Drawn:
        operand, negated = self.expr(depth, SUM), self.draw(st.booleans())
        items = [self.expr(depth, SUM) for _ in range(self.draw(st.integers(1, 4)))]
        listed: list[str] = []
        for item in items:
            listed += [*([","] if listed else []), *item.tokens]
        words = (*([self.kw("not")] if negated else []), self.kw("in"))
        return Drawn(InList(operand.node, tuple(i.node for i in items), negated),
                     (*operand.tokens, *words, "(", *listed, ")"), PREDICATE)

    def text_literal(self, text: str) -> tuple[str, ...]:
        """A string literal as tokens: quoted, a parameter or in parentheses."""
        how = self.draw(st.integers(0, 7))
        if how == 0:
            return self.parameter(text).tokens
        return ("(", quote(text), ")") if how == 1 else (quote(text),)

    def like(self, depth: int) -> Drawn:
        operand, negated = self.expr(depth, SUM), self.draw(st.booleans())
        pattern = self.draw(st.one_of(
            st.sampled_from(["%", "_", "", "a%", "%a", "R%", "_lue", "50!%", "a_b", "%!%%"]),
            st.text(alphabet="aA5%_!\\#'.\n\r", max_size=6), texts))
        escape = self.draw(st.one_of(st.none(), st.sampled_from("!\\#%_a'")))
        words = (*([self.kw("not")] if negated else []), self.kw("like"))
        tokens = (*operand.tokens, *words, *self.text_literal(pattern))
        if escape is not None:
            tokens += (self.kw("escape"), *self.text_literal(escape))
        return Drawn(Like(operand.node, pattern, escape, negated), tokens, PREDICATE)

    def not_(self, depth: int) -> Drawn:
        inner = self.expr(depth, NOT)
        return Drawn(Not(inner.node), (self.kw("not"), *inner.tokens), NOT)

    def and_(self, depth: int) -> Drawn:
        left, right = self.expr(depth, AND), self.expr(depth, NOT)
        return Drawn(Logical("and", left.node, right.node),
                     (*left.tokens, self.kw("and"), *right.tokens), AND)

    def or_(self, depth: int) -> Drawn:
        left, right = self.expr(depth, OR), self.expr(depth, AND)
        return Drawn(Logical("or", left.node, right.node),
                     (*left.tokens, self.kw("or"), *right.tokens), OR)


_WORDY = frozenset(string.ascii_letters + string.digits + "_$@.'\"[]")
_SPACES = (" ", " ", " ", "", "", "  ", "\n", "\t", " \r\n ")


def render(draw: st.DrawFn, tokens: tuple[str, ...]) -> tuple[str, tuple[int, ...]]:
    """The tokens joined by drawn whitespace (at least a space where two would merge);
    the text and each token's offset in it."""
    text, starts = draw(st.sampled_from(("", "", " ", "\n "))), []
    for i, token in enumerate(tokens):
        if i:
            space = draw(st.sampled_from(_SPACES))
            if not space and text[-1] in _WORDY and token[0] in _WORDY:
                space = " "
            text += space
        starts.append(len(text))
        text += token
    return text + draw(st.sampled_from(("", "", " ", "\t"))), tuple(starts)


PREDICATES = ("compare", "compare", "compare", "is_null", "in_", "like", "exists", "not_",
              "and_", "or_", "property", "literal")


@st.composite
def filters(draw: st.DrawFn, max_depth: int = 4, newid: bool = False,
            float_values: st.SearchStrategy[float] = floats) -> FilterCase:
    """A valid SQL filter (S15.4), mostly a predicate at the top."""
    gen = _Filters(draw, newid, float_values)
    drawn = gen.expr(draw(st.integers(0, max_depth)), OR, PREDICATES)
    text, starts = render(draw, drawn.tokens)
    assume(len(text) <= MAX_EXPRESSION_LENGTH)
    return FilterCase(text, gen.parameters, drawn.node, drawn.tokens, starts)


@dataclass(frozen=True)
class ActionCase:
    text: str
    parameters: dict[str, Any]
    statements: tuple[Set | Remove, ...]


@st.composite
def actions(draw: st.DrawFn, max_depth: int = 3) -> ActionCase:
    """A valid SQL action (S15.6): ``SET p = e`` and ``REMOVE p`` statements."""
    gen = _Filters(draw, False, floats)
    tokens: list[str] = []
    statements: list[Set | Remove] = []
    for _ in range(draw(st.integers(1, 4))):
        prop = gen.prop(calls=False)
        assert isinstance(prop.node, Property)
        if tokens:
            tokens.append(";")
        if draw(st.booleans()):
            value = gen.expr(draw(st.integers(0, max_depth)), OR)
            tokens += [gen.kw("set"), *prop.tokens, "=", *value.tokens]
            statements.append(Set(prop.node, value.node))
        else:
            tokens += [gen.kw("remove"), *prop.tokens]
            statements.append(Remove(prop.node))
    if draw(st.booleans()):
        tokens.append(";")
    text, _ = render(draw, tuple(tokens))
    assume(len(text) <= MAX_EXPRESSION_LENGTH)
    return ActionCase(text, gen.parameters, tuple(statements))
