"""The rule language fuzzed with Hypothesis, without Spark (SPEC S15.4-S15.7).

Filters and actions are drawn as trees and written out as text (tests/rule_fuzz.py), then:

- S15.4 / S15.6: each parses to exactly the tree it was drawn as;
- S15.5: evaluating it in Python on drawn messages never raises, and the value of every node
  is what S15.5 makes of its children's values (checked against a small reference written
  here: three-valued AND/OR/NOT, comparisons only within a kind, C# integer arithmetic,
  overflow and division by zero unknown, LIKE as a plain matcher without regular
  expressions);
- S15.7: text that is not a filter (garbage, drawn filters with a defect put in at a known
  place, semantic errors) is refused with InvalidOperationError naming the text, the
  position and the rule; never with any other exception.
"""

from __future__ import annotations

import math
import operator
import uuid
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rule_fuzz import (
    ARITH_OPS,
    COMPARE_OPS,
    INT_MAX,
    INT_MIN,
    KEYWORDS,
    ActionCase,
    FilterCase,
    actions,
    cased,
    close_pairs,
    filters,
    messages,
)

from sbqueue.core.rule_eval import RuleMessage, apply_actions, evaluate, matches, message_view
from sbqueue.core.rule_syntax import (
    SYSTEM_PROPERTIES,
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
    parse_action,
    parse_filter,
)
from sbqueue.exceptions import InvalidOperationError
from sbqueue.store.variant import java_double


def fuzz(examples: int) -> settings:
    """Few enough examples that the file runs in seconds; no deadline (the first parse
    builds the grammar)."""
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
Message = tuple[dict[str, Any], dict[str, Any] | None]


# --- the reference semantics (S15.5), written independently of core.rule_eval


def _kind(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    return {int: "number", float: "number", str: "string"}.get(type(value), "other")


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same type (True is not 1, 1 is not 1.0; NaN is NaN)."""
    if type(a) is not type(b):
        return False
    return bool(a == b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def _truth(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _lookup(prop: Property, message: Message) -> tuple[bool, Any]:
    fields, props = message
    if prop.scope == "sys":
        return fields.get(prop.name) is not None, fields.get(prop.name)
    found = [v for k, v in (props or {}).items() if k.lower() == prop.name.lower()]
    return bool(found), found[0] if found else None


_ORDER = {"=": operator.eq, "<>": operator.ne, "!=": operator.ne, "<": operator.lt,
          "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _compare(op: str, a: Any, b: Any) -> bool | None:
    kind = _kind(a)
    if kind is None or kind != _kind(b) or kind == "other":
        return None  # unknown, or two kinds: strings never become numbers
    if kind == "bool" and op not in ("=", "<>", "!="):
        return None
    if kind == "number" and type(a) is not type(b):
        a, b = float(a), float(b)  # an int and a double compare as doubles (C#, Spark)
    return bool(_ORDER[op](a, b))


def _in_range(value: int) -> int | None:
    return value if INT_MIN <= value <= INT_MAX else None


def _arith(op: str, a: Any, b: Any) -> Any:
    if op == "+" and isinstance(a, str) and isinstance(b, str):
        return a + b
    if _kind(a) != "number" or _kind(b) != "number":
        return None
    if isinstance(a, int) and isinstance(b, int):
        if op in ("/", "%") and b == 0:
            return None
        quotient = int(Fraction(a, b)) if b else 0  # truncated toward zero, as in C#
        exact = {"+": a + b, "-": a - b, "*": a * b, "/": quotient, "%": a - b * quotient}[op]
        return _in_range(exact)
    x, y = float(a), float(b)
    if op in ("/", "%") and y == 0:
        return None
    if op == "%":
        result = math.nan if math.isinf(x) else math.fmod(x, y)  # IEEE: inf % y is NaN
    else:
        result = x / y if op == "/" else {"+": x + y, "-": x - y, "*": x * y}[op]
    return result if math.isfinite(result) else None


def _like(value: str, pattern: str, escape: str | None) -> bool:
    """LIKE as a set of positions stepped through the pattern: % any run, _ one character,
    the escape character makes the next one literal (at the very end it is itself)."""
    items: list[str | None] = []  # a literal character, "%" for any run, None for one
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            items.append("\\" + pattern[i + 1])
            i += 2
            continue
        items.append("%" if ch == "%" else None if ch == "_" else "\\" + ch)
        i += 1
    at = {0}
    for item in items:
        if item == "%":
            at = set(range(min(at), len(value) + 1)) if at else set()
        else:
            at = {p + 1 for p in at if p < len(value) and (item is None or value[p] == item[1])}
    return len(value) in at


def _expected(node: Node, view: RuleMessage, message: Message) -> Any:
    """The value S15.5 gives ``node``, from its children's values as evaluated."""
    def ev(child: Node) -> Any:
        return evaluate(child, view)

    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Property):
        return _lookup(node, message)[1]
    if isinstance(node, Unary):
        value = ev(node.operand)
        if _kind(value) != "number":
            return None
        if node.op == "+":
            return value
        return _in_range(-value) if isinstance(value, int) else (
            -value if math.isfinite(value) else None)
    if isinstance(node, Binary):
        a, b = ev(node.left), ev(node.right)
        return _compare(node.op, a, b) if node.op in _ORDER else _arith(node.op, a, b)
    if isinstance(node, Logical):
        a, b = _truth(ev(node.left)), _truth(ev(node.right))
        if node.op == "and":
            return False if False in (a, b) else None if None in (a, b) else True
        return True if True in (a, b) else None if None in (a, b) else False
    if isinstance(node, Not):
        value = _truth(ev(node.operand))
        return None if value is None else not value
    if isinstance(node, IsNull):
        return (ev(node.operand) is None) != node.negated
    if isinstance(node, Exists):
        return _lookup(node.prop, message)[0]
    if isinstance(node, InList):
        value = ev(node.operand)
        if value is None:
            return None
        found = [_compare("=", value, ev(item)) for item in node.items]
        hit = True if True in found else None if None in found else False
        return None if hit is None else hit != node.negated
    if isinstance(node, Like):
        value = ev(node.operand)
        if not isinstance(value, str):
            return None
        return _like(value, node.pattern, node.escape) != node.negated
    raise AssertionError(f"unexpected node {node!r}")


def _subtrees(node: Node) -> list[Node]:
    children: list[Node] = []
    if isinstance(node, (Unary, Not, IsNull, Like)):
        children = [node.operand]
    elif isinstance(node, (Binary, Logical)):
        children = [node.left, node.right]
    elif isinstance(node, InList):
        children = [node.operand, *node.items]
    elif isinstance(node, Exists):
        children = [node.prop]
    return [node, *(n for child in children for n in _subtrees(child))]


def _has_newid(node: Node) -> bool:
    return any(isinstance(n, NewId) for n in _subtrees(node))


def _allowed(value: Any) -> bool:
    """The values of S15.5: unknown, bool, 64-bit int, double, string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return INT_MIN <= value <= INT_MAX
    return value is None or isinstance(value, (bool, float, str))


# --- S15.4, S15.5: drawn valid filters


@fuzz(250)
@given(filters())
def test_s15_4_drawn_filter_parses_to_the_tree_it_was_drawn_as(case: FilterCase) -> None:
    """S15.4: precedence, associativity, literals (exponents, ``''``, folded negatives),
    names in every spelling, parameters, keywords in any case, any whitespace."""
    assert repr(parse_filter(case.text, case.parameters)) == repr(case.tree), case.text


@fuzz(250)
@given(filters(newid=True), messages)
def test_s15_5_every_node_evaluates_as_three_valued_logic_says(
        case: FilterCase, message: Message) -> None:
    """S15.5: evaluation never raises; every node's value is allowed and is what its
    children's values make it; only TRUE matches."""
    tree = parse_filter(case.text, case.parameters)
    view = message_view(*message)
    for node in _subtrees(tree):
        got = evaluate(node, view)
        assert _allowed(got), (case.text, node, got)
        if isinstance(node, NewId):
            assert uuid.UUID(got)
        elif not _has_newid(node):  # newid() differs each time it is evaluated
            want = _expected(node, view, message)
            assert _same(got, want), (case.text, message, node, got, want)
    if not _has_newid(tree):
        assert matches(tree, view) is (evaluate(tree, view) is True)


def test_s15_5_reference_catches_known_answers() -> None:
    """The reference above agrees with the hand-written table's kind of answers (so a
    broken reference cannot hide a broken evaluator)."""
    assert _like("a\n", "a", None) is False
    assert _like("50%", "50!%", "!") is True
    assert _like("abc", "a%c", None) and not _like("ab", "a_c", None)
    assert _arith("/", -7, 2) == -3 and _arith("%", -7, 2) == -1
    assert _arith("+", INT_MAX, 1) is None and _arith("%", math.inf, 2.0) is None
    assert _compare("=", 2**53 + 1, float(2**53)) is True and _compare("=", "5", 5) is None


@fuzz(300)
@given(close_pairs)
def test_s15_5_every_operator_on_edge_values(pair: tuple[Any, Any]) -> None:
    """S15.5 for each operator alone, on values drawn to sit on its edges (64-bit limits,
    an int against the nearest double, infinities, NaN, zero divisors, line terminators
    after a LIKE pattern's text)."""
    a, b = pair
    message: Message = ({}, {"a": a, "b": b})
    view = message_view(*message)
    pattern = b if isinstance(b, str) else "%"
    texts = [f"a {op} b" for op in (*COMPARE_OPS, *ARITH_OPS)] + [
        "-a", "+a", "a IN (b)", "a NOT IN (b, 1)", "a LIKE @p", "a NOT LIKE @p",
        "a LIKE @p ESCAPE '!'"]
    for text in texts:
        tree = parse_filter(text, {"p": pattern})
        got, want = evaluate(tree, view), _expected(tree, view, message)
        assert _same(got, want), (text, a, b, got, want)
    if _kind(a) == "number":  # a parameter negated: folded into a literal unless it overflows
        got = evaluate(parse_filter("-@n", {"n": a}), view)
        want = -a if isinstance(a, float) else _in_range(-a)  # -(-2**63): unknown
        assert _same(got, want), ("-@n", a, got, want)


@fuzz(100)
@given(actions(), messages)
def test_s15_6_drawn_actions_parse_and_apply_in_order(case: ActionCase, message: Message) -> None:
    """S15.6: the statements parse as drawn; each SET sees the ones before it; REMOVE takes
    the property away; the original message is untouched."""
    statements = parse_action(case.text, case.parameters)
    assert repr(statements) == repr(case.statements), case.text
    view = message_view(*message)
    before = repr(view)
    copy = apply_actions(statements, view)
    assert repr(view) == before
    # the reference: the same statements, one at a time
    system, user = dict(view.system), dict(view.user)
    for statement in statements:
        prop = statement.prop
        key = next((k for k in user if k.lower() == prop.name.lower()), None)
        value = evaluate(statement.value, RuleMessage(dict(system), dict(user))) \
            if isinstance(statement, Set) else None
        if prop.scope == "sys":
            system[prop.name] = None if value is None else (
                value if isinstance(value, str) else str(value).lower()
                if isinstance(value, bool) else java_double(value)
                if isinstance(value, float) else str(value))
        elif isinstance(statement, Remove):
            if key is not None:
                del user[key]
        else:
            user[prop.name if key is None else key] = value
    assert repr(copy.system) == repr(system) and repr(copy.user) == repr(user), case.text


# --- S15.7: what is not a filter is refused, with the project's own error


def _where(text: str, at: int) -> str:
    """Lark's position of offset ``at``: 1-based line and column."""
    line = text.count("\n", 0, at) + 1
    return f"line {line}, column {at - text.rfind(chr(10), 0, at)}"


def _refusal(text: Any, parameters: dict[str, Any] | None = None, *, action: bool = False
             ) -> str:
    """The message of the InvalidOperationError that refuses ``text`` (any other outcome,
    acceptance included, fails), checked to name the text and the rule."""
    try:
        (parse_action if action else parse_filter)(text, parameters)
    except InvalidOperationError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"accepted: {text!r}")
    assert "(S15." in message, message
    if isinstance(text, str) and len(text.strip()) > 0 and len(text) <= 1024:
        assert repr(text) in message, message
    return message


_BAD_CHARS = "~?#&|^{}`\\:;"


@st.composite
def defective_filters(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[str]]:
    """A drawn filter with a defect put in where we know it is: (text, parameters, what
    the refusal must say)."""
    case = draw(filters(max_depth=3))
    text, kind = case.text, draw(st.sampled_from(["char", "paren", "dangling", "quote"]))
    if kind == "char":  # a character no token has, before a token or at the end
        char = draw(st.sampled_from(_BAD_CHARS))
        k = draw(st.integers(0, len(case.tokens)))
        at = case.starts[k] if k < len(case.tokens) else len(text)
        bad = text[:at] + char + text[at:]
        return bad, case.parameters, [_where(bad, at), repr(char)]
    if kind == "paren":  # unbalanced: every parenthesis of the grammar comes in a pair
        parens = [i for i, token in enumerate(case.tokens) if token in ("(", ")")]
        if parens and draw(st.booleans()):
            at = case.starts[draw(st.sampled_from(parens))]
            return text[:at] + text[at + 1:], case.parameters, []
        return draw(st.sampled_from([f"({text}", f"{text})"])), case.parameters, []
    if kind == "dangling":  # AND / OR with nothing after
        return f"{text} {draw(cased(draw(st.sampled_from(['and', 'or']))))}", \
            case.parameters, ["end of text"]
    prefix = f"{text} AND x = "  # a string that never ends
    bad = prefix + "'" + draw(st.text(st.characters(codec="utf-8", exclude_characters="'"),
                                      max_size=5))
    return bad, case.parameters, [_where(bad, len(prefix)), repr("'")]


@fuzz(200)
@given(defective_filters())
def test_s15_7_defective_filter_is_refused_at_its_position(
        drawn: tuple[str, dict[str, Any], list[str]]) -> None:
    text, parameters, says = drawn
    message = _refusal(text, parameters)
    for part in says:
        assert part in message, (message, part)


_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: n.lower() not in KEYWORDS)


@st.composite
def semantic_errors(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[str]]:
    """A drawn filter joined to a part that parses but means nothing: (text, parameters,
    what the refusal must say)."""
    case = draw(filters(max_depth=2))
    parameters = dict(case.parameters)
    kind = draw(st.sampled_from(["sys", "function", "missing", "integer", "like", "escape",
                                 "type", "range"]))
    offset, says = 0, []  # where the offending token is in ``bad``, what must be said
    if kind == "sys":
        name = draw(_NAMES.filter(lambda n: n.lower() not in SYSTEM_PROPERTIES))
        bad, offset, says = f"sys.{name} = 'x'", 4, [f"sys.{name}"]
    elif kind == "function":
        name = draw(_NAMES.filter(lambda n: n.lower() not in ("newid", "property", "p")))
        bad, says = f"{name}(1) = 1", ["unknown function", name]
    elif kind == "missing":
        bad, offset, says = "x = @missing", 4, ["@missing has no value"]
    elif kind == "integer":
        bad, offset, says = f"x = {draw(st.integers(2**63, 10**40))}", 4, ["64 bits"]
    elif kind == "like":
        pattern = draw(st.sampled_from(["5", "y", "NULL", "TRUE", "1.5", "'a' + 'b'", "@n"]))
        parameters["n"] = 5
        bad, offset, says = f"x LIKE {pattern}", -1, ["LIKE takes a string pattern"]
    elif kind == "escape":
        escape = draw(st.sampled_from(["''", "'ab'", "1", "x", "NULL"]))
        bad, offset, says = f"x LIKE 'a' ESCAPE {escape}", -1, ["ESCAPE takes one character"]
    elif kind == "type":
        parameters["bad"] = draw(st.sampled_from([[1], b"x", {"a": 1}, object(), 1j, {2}]))
        bad, offset, says = "x = @bad", 4, ["@bad", "allowed: string"]
    else:
        parameters["big"] = draw(st.integers(2**63, 2**80) | st.integers(-(2**80), -(2**63) - 1))
        bad, offset, says = "x = @big", 4, ["@big", "64 bits"]
    if draw(st.booleans()):
        text, at = f"{case.text} AND {bad}", len(case.text) + 5
    else:
        text, at = f"({bad}) OR ({case.text})", 1
    if offset >= 0:
        says.append(_where(text, at + offset))
    return text, parameters, says


@fuzz(150)
@given(semantic_errors())
def test_s15_7_meaningless_filter_is_refused_naming_the_offending_part(
        drawn: tuple[str, dict[str, Any], list[str]]) -> None:
    """Unknown system properties and functions, missing or unusable parameters, integers
    beyond 64 bits, LIKE without a string pattern or a one-character escape."""
    text, parameters, says = drawn
    message = _refusal(text, parameters)
    for part in says:
        assert part in message, (message, part)


_VOCABULARY = ["(", ")", ",", ";", "=", "<>", "!=", "<", ">=", "+", "-", "*", "/", "%", ".",
               "AND", "or", "Not", "IS", "NULL", "IN", "LIKE", "ESCAPE", "EXISTS", "TRUE",
               "false", "SET", "REMOVE", "sys", "user", "x", "[a b]", '"q"', "'s'", "'", '"',
               "[", "]", "1", "1.5", "1E5", "9223372036854775808", "@p", "@", "newid",
               "p", "property", "~", "$", "_", "\\", "\n", "\u0663", "\u017f", "--", "/*"]
_DEEP = st.builds(lambda unit, n, end: (unit * n)[:1000] + end,
                  st.sampled_from(["-", "+", "NOT ", "(", "- ", "-(", "(-", "+1+", "x+", "p("]),
                  st.integers(0, 1000), st.sampled_from(["x", "1", "x)", "1)"]))
garbage = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="()'\"[]=<>!+-*/%.,;@ aZe09_$\n\t", max_size=30),
    st.lists(st.sampled_from(_VOCABULARY), max_size=15).map(" ".join),
    st.lists(st.sampled_from(_VOCABULARY), max_size=15).map("".join),
    _DEEP,
    st.integers(0, 200).map(lambda n: "x = 1" + " OR x = 1" * n),
    st.sampled_from([None, 5, b"x = 1", ["x"], "", "   ", "\n"]),
)


@fuzz(400)
@given(garbage)
def test_s15_7_any_text_is_parsed_or_refused_never_a_crash(text: Any) -> None:
    """Whatever the text: a filter (which then evaluates), an action (which then applies),
    or InvalidOperationError naming it and the rule; never a lark error, a RecursionError
    or anything else."""
    view = message_view({"message_id": "m"}, {"x": 1, "p": "s"})
    for action in (False, True):
        try:
            parsed = (parse_action if action else parse_filter)(text, {"p": 1})
        except InvalidOperationError:
            _refusal(text, {"p": 1}, action=action)
            continue
        if action:
            apply_actions(parsed, view)
        else:
            assert _allowed(evaluate(parsed, view))


@fuzz(60)
@given(st.sampled_from(["-", "NOT ", "- (", "+1+", "x OR "]), st.integers(1, 1020))
def test_s15_7_deep_nesting_is_refused_or_evaluates(unit: str, n: int) -> None:
    """A deeply nested filter within 1024 characters is refused as too deep, or it parses
    and evaluates: never a RecursionError (the parser, the evaluator and the Spark
    compiler each recurse once or more per level)."""
    opens = unit.count("(")
    n = min(n, (1024 - 1) // (len(unit) + opens))
    text = unit * n + "x" + ")" * (opens * n)
    try:
        tree = parse_filter(text)
    except InvalidOperationError as exc:
        assert "nested" in str(exc), str(exc)
        return
    assert _allowed(evaluate(tree, message_view({}, {"x": 1})))


def test_s15_7_a_long_or_list_is_not_too_deep() -> None:
    """The depth limit leaves room for what filters are written as: 120 alternatives."""
    text = " OR ".join(f"a={i}" for i in range(150))[:1024].rsplit(" OR ", 1)[0]
    assert matches(parse_filter(text), message_view({}, {"a": 100}))
