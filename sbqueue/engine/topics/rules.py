"""A rule tree (``core.rule_syntax``) compiled to Spark columns, so that a topic send
filters and transforms all its rows in one vectorized projection (SPEC S15.2-S15.6).

Every value is a ``Value``: a kind ('bool', 'int', 'double', 'string', 'other' or NULL for
unknown) beside one typed expression per kind. That is how the rules of S15.5 hold in
Spark as they do in ``core.rule_eval``: strings are never cast to numbers (a comparison
between kinds is unknown), int and double compare numerically, unknown propagates, and
arithmetic that would overflow or divide by zero is unknown instead of an ANSI error. User
properties are read from the VARIANT ``application_properties`` through a
``map<string, variant>`` (``PROPS``, added once per send) and matched case-insensitively.

How the columns are built (decision 009):

- Each compound node is bound to columns of its own, computed from its children's columns
  (``RulePlan``, added level by level: one ``selectExpr`` per level for any number of
  rules) and equal subtrees are shared. Inlined, a node's kind and typed expressions each
  repeated its children's, so plans grew exponentially with depth.
- A level's expressions are SQL text assembled from fixed templates, the names of bound
  columns and the names of literal columns. Every value from a rule (strings, numbers,
  property names, LIKE patterns) enters Spark only as a literal column made with
  ``F.lit``: no text of a rule is ever part of the SQL. Building them as Column objects
  instead took ~1,700 Py4J calls per subscription (28 s to plan 100 subscriptions);
  templates take one call per level and per literal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sbqueue.core.rule_eval import like_regex
from sbqueue.core.rule_syntax import (
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
    Unary,
)

__all__ = ["PROPS", "RulePlan", "with_props"]

PROPS = "_rule_props"  # application_properties as map<string, variant>
_NUMBERS = "('int', 'double')"
_SQL_OPS = {"=": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_INT_OPS = {"+": "try_add", "-": "try_subtract", "*": "try_multiply"}
_KINDS = {"b": "BOOLEAN", "i": "BIGINT", "d": "DOUBLE", "s": "STRING"}


@dataclass(frozen=True)
class Value:
    """SQL expressions (over bound and literal columns) of one value; None is NULL."""

    kind: str | None
    b: str | None = None
    i: str | None = None
    d: str | None = None
    s: str | None = None
    level: int = 0  # the plan level its columns are available from (0: the row's own)

    def part(self, name: str) -> str:
        text: str | None = getattr(self, name)
        return text if text is not None else f"CAST(NULL AS {_KINDS.get(name, 'STRING')})"

    @property
    def k(self) -> str:
        return self.kind if self.kind is not None else "CAST(NULL AS STRING)"


def with_props(df: DataFrame) -> DataFrame:
    """``df`` with ``PROPS``: its application properties as a map (one cast per row)."""
    return df.withColumn(PROPS, F.col("application_properties").cast("map<string,variant>"))


def _finite(x: str) -> str:
    return f"CASE WHEN isnan({x}) OR abs({x}) = CAST('Infinity' AS DOUBLE) THEN NULL ELSE {x} END"


def _boolean(v: Value) -> str:
    return f"(CASE WHEN {v.k} = 'bool' THEN {v.part('b')} END)"


def _compare(op: str, a: Value, b: Value) -> str:
    """A boolean expression, NULL when unknown (different kinds, unknown operands)."""
    sql = _SQL_OPS[op]
    # Spark orders NaN above every double and equal to itself; S15.5 follows IEEE (as C# and
    # core.rule_eval): NaN is only ever unequal.
    nan = f"isnan({a.part('d')}) OR isnan({b.part('d')})"
    cases = [f"WHEN {a.k} = 'int' AND {b.k} = 'int' THEN {a.part('i')} {sql} {b.part('i')}",
             f"WHEN {a.k} IN {_NUMBERS} AND {b.k} IN {_NUMBERS} "
             f"THEN CASE WHEN {nan} THEN {'true' if sql == '<>' else 'false'} "
             f"ELSE {a.part('d')} {sql} {b.part('d')} END",
             f"WHEN {a.k} = 'string' AND {b.k} = 'string' THEN {a.part('s')} {sql} {b.part('s')}"]
    if sql in ("=", "<>"):
        cases.append(f"WHEN {a.k} = 'bool' AND {b.k} = 'bool' "
                     f"THEN {a.part('b')} {sql} {b.part('b')}")
    return f"(CASE {' '.join(cases)} END)"


def _arith(op: str, a: Value, b: Value) -> Value:
    """``a op b`` unbound: int (exact, NULL on overflow), double, or string for ``+``."""
    ai, bi, ad, bd = a.part("i"), b.part("i"), a.part("d"), b.part("d")
    ints = f"{a.k} = 'int' AND {b.k} = 'int'"
    numbers = f"{a.k} IN {_NUMBERS} AND {b.k} IN {_NUMBERS}"
    if op in _INT_OPS:
        i = f"{_INT_OPS[op]}({ai}, {bi})"
        d = _finite(f"({ad} {op} {bd})")
    elif op == "/":
        i = (f"CASE WHEN {bi} = 0 OR ({ai} = -9223372036854775807 - 1 AND {bi} = -1) "
             f"THEN NULL ELSE {ai} div {bi} END")
        d = _finite(f"(CASE WHEN {bd} = 0 THEN NULL ELSE {ad} / {bd} END)")
    else:
        i = f"CASE WHEN {bi} = 0 THEN NULL WHEN {bi} = -1 THEN 0 ELSE {ai} % {bi} END"
        d = _finite(f"(CASE WHEN {bd} = 0 THEN NULL ELSE {ad} % {bd} END)")
    strings = f"{a.k} = 'string' AND {b.k} = 'string'" if op == "+" else "false"
    kind = (f"CASE WHEN {ints} THEN (CASE WHEN ({i}) IS NOT NULL THEN 'int' END) "
            f"WHEN {strings} THEN 'string' "
            f"WHEN {numbers} AND ({d}) IS NOT NULL THEN 'double' END")
    return Value(kind, i=f"CASE WHEN {ints} THEN ({i}) END",
                 d=f"CASE WHEN {ints} THEN CAST(({i}) AS DOUBLE) WHEN {numbers} THEN ({d}) END",
                 s=f"CASE WHEN {strings} THEN concat({a.part('s')}, {b.part('s')}) END"
                 if op == "+" else None,
                 level=max(a.level, b.level))


def _as_variant(v: Value) -> str:
    return (f"CASE WHEN {v.k} = 'int' THEN CAST({v.part('i')} AS VARIANT) "
            f"WHEN {v.k} = 'double' THEN CAST({v.part('d')} AS VARIANT) "
            f"WHEN {v.k} = 'string' THEN CAST({v.part('s')} AS VARIANT) "
            f"WHEN {v.k} = 'bool' THEN CAST({v.part('b')} AS VARIANT) END")


def _as_text(v: Value) -> str:
    return (f"CASE WHEN {v.k} = 'string' THEN {v.part('s')} "
            f"WHEN {v.k} = 'int' THEN CAST({v.part('i')} AS STRING) "
            f"WHEN {v.k} = 'double' THEN CAST({v.part('d')} AS STRING) "
            f"WHEN {v.k} = 'bool' THEN CASE WHEN {v.part('b')} THEN 'true' ELSE 'false' END END")


@dataclass
class RulePlan:
    """The columns that evaluate a set of rules: ``add_to(df)`` adds them, after which the
    columns returned by ``filter_column`` and ``action_columns`` are valid; ``temporary``
    names every column it added."""

    prefix: str = "_rule"
    levels: list[list[str]] = field(default_factory=list)
    literals: dict[str, Any] = field(default_factory=dict)
    temporary: list[str] = field(default_factory=list)
    _cache: dict[Any, Any] = field(default_factory=dict)

    def add_to(self, df: DataFrame) -> DataFrame:
        if self.literals:
            df = df.withColumns({n: F.lit(v) for n, v in self.literals.items()})
        for level in self.levels:
            df = df.selectExpr("*", *level)
        return df

    def literal(self, value: Any) -> str:
        """The name of a literal column holding ``value`` (the only way a rule's values
        reach Spark)."""
        key = ("literal", type(value).__name__, value)
        if key not in self._cache:
            name = f"{self.prefix}_l{len(self.literals)}"
            self.literals[name] = value
            self.temporary.append(name)
            self._cache[key] = name
        found: str = self._cache[key]
        return found

    def bind_sql(self, sql: str, level: int) -> str:
        """``sql`` as a column of its own at ``level``; its name."""
        while len(self.levels) <= level:
            self.levels.append([])
        name = f"{self.prefix}{len(self.temporary)}"
        self.levels[level].append(f"{sql} AS {name}")
        self.temporary.append(name)
        return name

    def bind(self, value: Value) -> Value:
        """``value`` as columns of its own, one level above its inputs."""
        parts = {p: self.bind_sql(getattr(value, p), value.level)
                 for p in ("kind", "b", "i", "d", "s") if getattr(value, p) is not None}
        return Value(parts.get("kind"), parts.get("b"), parts.get("i"), parts.get("d"),
                     parts.get("s"), level=value.level + 1)

    def filter_column(self, node: Node) -> Column:
        """True where ``node`` matches (only TRUE matches, S15.5); never NULL."""
        value = _Compiler(self, _Message(PROPS, 0, {}, "base")).value(node)
        return F.expr(f"coalesce({_boolean(value)}, false)")

    def action_columns(self, actions: tuple[Action, ...], rule_name: str) -> dict[str, Column]:
        """The columns a rule's copy replaces (S15.6): ``application_properties``, with
        ``RuleName`` set (S15.2), and each system field the actions set; statements apply
        in order, each seeing the ones before it (as ``core.rule_eval.apply_actions``)."""
        empty = "CAST(map() AS MAP<STRING, VARIANT>)"
        props = self.bind_sql(f"coalesce({PROPS}, {empty})", 0)
        message = _Message(props, 1, {}, f"action:{props}")
        for n, action in enumerate(actions):
            message = _Compiler(self, message).apply(action, n)
        named = (f"to_variant_object(map_concat(map_filter({message.props}, "
                 f"(k, x) -> lower(k) <> 'rulename'), "
                 f"map('RuleName', CAST({self.literal(rule_name)} AS VARIANT))))")
        bound = self.bind_sql(named, message.level)
        return {**{f: F.col(n) for f, n in message.fields.items()},
                "application_properties": F.col(bound)}


@dataclass(frozen=True)
class _Message:
    """The message a node is evaluated on: its user properties (a map column available
    from ``level``), its changed system fields (bound column names), a key for sharing."""

    props: str
    level: int
    fields: dict[str, str]
    key: str


class _Compiler:
    def __init__(self, plan: RulePlan, message: _Message) -> None:
        self.plan = plan
        self.message = message

    def entries(self, name: str) -> str:
        lowered = self.plan.literal(name.lower())
        return f"map_filter({self.message.props}, (k, x) -> lower(k) = {lowered})"

    def field(self, name: str) -> str:
        return self.message.fields.get(name, f"`{name}`")

    def prop(self, prop: Property) -> Value:
        if prop.scope == "sys":
            column = self.field(prop.name)
            return Value(f"CASE WHEN {column} IS NOT NULL THEN 'string' END", s=column,
                         level=self.message.level)
        v = self.plan.bind_sql(f"get(map_values({self.entries(prop.name)}), 0)",
                               self.message.level)
        t = f"schema_of_variant({v})"
        kind = (f"CASE WHEN {v} IS NULL OR {t} = 'VOID' THEN NULL "
                f"WHEN {t} IN ('BIGINT', 'INT', 'SMALLINT', 'TINYINT') THEN 'int' "
                f"WHEN {t} IN ('DOUBLE', 'FLOAT') OR {t} LIKE 'DECIMAL%' THEN 'double' "
                f"WHEN {t} = 'STRING' THEN 'string' WHEN {t} = 'BOOLEAN' THEN 'bool' "
                "ELSE 'other' END")
        level = self.message.level + 1
        k = self.plan.bind_sql(kind, level)

        def typed(kinds: str, sql_type: str) -> str:
            return self.plan.bind_sql(
                f"CASE WHEN {k} IN {kinds} THEN try_variant_get({v}, '$', '{sql_type}') END",
                level + 1)

        return Value(k, typed("('bool')", "boolean"), typed("('int')", "bigint"),
                     typed(_NUMBERS, "double"), typed("('string')", "string"),
                     level=level + 2)

    def literal(self, value: Any) -> Value:
        if value is None:
            return Value(None)
        if isinstance(value, bool):
            return Value("'bool'", b="true" if value else "false")
        name = self.plan.literal(value)
        if isinstance(value, int):
            return Value("'int'", i=f"CAST({name} AS BIGINT)", d=f"CAST({name} AS DOUBLE)")
        if isinstance(value, float):
            return Value("'double'", d=f"CAST({name} AS DOUBLE)")
        return Value("'string'", s=name)

    def predicate(self, node: Node) -> tuple[str, int] | None:
        """The boolean expression of a predicate node and its level, or None."""
        if isinstance(node, Binary) and node.op in _SQL_OPS:
            a, b = self.value(node.left), self.value(node.right)
            return _compare(node.op, a, b), max(a.level, b.level)
        if isinstance(node, Logical):
            a, b = self.value(node.left), self.value(node.right)
            return (f"({_boolean(a)} {node.op.upper()} {_boolean(b)})",
                    max(a.level, b.level))
        if isinstance(node, Not):
            a = self.value(node.operand)
            return f"(NOT {_boolean(a)})", a.level
        if isinstance(node, IsNull):
            a = self.value(node.operand)
            return f"({a.k} IS {'NOT ' if node.negated else ''}NULL)", a.level
        if isinstance(node, Exists):
            if node.prop.scope == "sys":
                return f"({self.field(node.prop.name)} IS NOT NULL)", self.message.level
            return (f"coalesce(size({self.entries(node.prop.name)}) > 0, false)",
                    self.message.level)
        if isinstance(node, InList):
            a = self.value(node.operand)
            items = [self.value(item) for item in node.items]
            found = " OR ".join(["false", *[_compare("=", a, item) for item in items]])
            return (f"({'NOT ' if node.negated else ''}({found}))",
                    max([a.level] + [x.level for x in items]))
        if isinstance(node, Like):
            a = self.value(node.operand)
            regex = self.plan.literal("(?s)" + like_regex(node.pattern, node.escape))
            hit = f"(CASE WHEN {a.k} = 'string' THEN rlike({a.part('s')}, {regex}) END)"
            return (f"(NOT {hit})" if node.negated else hit), a.level
        return None

    def value(self, node: Node) -> Value:
        key = (repr(node), self.message.key)  # repr: Literal(True) == Literal(1) as data
        if key not in self.plan._cache or isinstance(node, NewId):
            self.plan._cache[key] = self._compute(node)
        found: Value = self.plan._cache[key]
        return found

    def _compute(self, node: Node) -> Value:
        if isinstance(node, Literal):
            return self.literal(node.value)
        if isinstance(node, Property):
            return self.prop(node)
        if isinstance(node, NewId):
            return self.plan.bind(Value("'string'", s="uuid()", level=self.message.level))
        predicate = self.predicate(node)
        if predicate is not None:
            sql, level = predicate
            return self.plan.bind(Value(f"CASE WHEN {sql} IS NOT NULL THEN 'bool' END",
                                        b=sql, level=level))
        if isinstance(node, Unary):
            a = self.value(node.operand)
            if node.op == "+":
                return Value(f"CASE WHEN {a.k} IN {_NUMBERS} THEN {a.k} END", i=a.i, d=a.d,
                             level=a.level)
            return self.plan.bind(_arith("-", self.literal(0), a))
        if isinstance(node, Binary):
            return self.plan.bind(_arith(node.op, self.value(node.left),
                                         self.value(node.right)))
        raise TypeError(f"not a rule node: {node!r}")

    def apply(self, action: Action, n: int) -> _Message:
        """The message after one SET or REMOVE statement, bound as columns of its own."""
        m, prop = self.message, action.prop
        key = f"{m.key}.{n}"
        if prop.scope == "sys":
            if isinstance(action, Remove):
                text, level = "CAST(NULL AS STRING)", m.level
            else:
                value = self.value(action.value)
                text, level = _as_text(value), max(m.level, value.level)
            bound = self.plan.bind_sql(text, level)
            return _Message(m.props, max(m.level, level + 1), {**m.fields, prop.name: bound},
                            key)
        lowered = self.plan.literal(prop.name.lower())
        rest = f"map_filter({m.props}, (k, x) -> lower(k) <> {lowered})"
        level = m.level
        if isinstance(action, Remove):
            props = rest
        else:
            value = self.value(action.value)
            level = max(level, value.level)
            existing = f"get(map_keys({self.entries(prop.name)}), 0)"
            props = (f"map_concat({rest}, map(coalesce({existing}, "
                     f"{self.plan.literal(prop.name)}), {_as_variant(value)}))")
        bound = self.plan.bind_sql(props, level)
        return _Message(bound, level + 1, m.fields, key)
