"""A rule tree (``core.rule_syntax``) compiled to Spark Columns, so that a topic send
filters and transforms all its rows in one vectorized projection (SPEC S15.2-S15.6).

Every value is a ``Value``: a kind column ('bool', 'int', 'double', 'string', 'other' or
NULL for unknown) beside one typed column per kind. That is how the rules of S15.5 hold in
Spark as they do in ``core.rule_eval``: strings are never cast to numbers (a comparison
between kinds is unknown), int and double compare numerically, unknown propagates, and
arithmetic that would overflow or divide by zero is unknown instead of an ANSI error.
User properties are read from the VARIANT ``application_properties`` through a
``map<string, variant>`` (``PROPS``, added once per send) and matched case-insensitively.
The tree is walked in Python; no text of a rule ever reaches Spark SQL.

Each compound node is bound to columns of its own, computed from its children's columns
(``RulePlan``: added level by level, a few ``withColumns`` for any number of rules). Inlined,
a node's kind and typed columns each repeat its children's trees, so plans grew
exponentially with depth: the first version ran a 54-case table out of driver memory.
Binding also shares equal subtrees (a property read by 100 subscriptions is read once).
"""

from __future__ import annotations

from dataclasses import dataclass
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
_INTS = ("BIGINT", "INT", "SMALLINT", "TINYINT")


@dataclass(frozen=True)
class Value:
    kind: Column
    b: Column
    i: Column
    d: Column
    s: Column
    level: int = 0  # the plan level its columns are available from (0: the row's own)


def with_props(df: DataFrame) -> DataFrame:
    """``df`` with ``PROPS``: its application properties as a map (one cast per row)."""
    return df.withColumn(PROPS, F.col("application_properties").cast("map<string,variant>"))


def _null() -> Column:
    return F.lit(None)


def _make(kind: Column, b: Column | None = None, i: Column | None = None,
          d: Column | None = None, s: Column | None = None, level: int = 0) -> Value:
    """A value; a kind column without a typed column is NULL in it."""
    typed = [(c if c is not None else _null()).cast(t) for c, t in (
        (b, "boolean"), (i, "long"), (d, "double"), (s, "string"))]
    return Value(kind, typed[0], typed[1], typed[2], typed[3], level=level)


def _literal(value: Any) -> Value:
    if value is None:
        return _make(_null().cast("string"))
    if isinstance(value, bool):
        return _make(F.lit("bool"), b=F.lit(value))
    if isinstance(value, int):
        return _make(F.lit("int"), i=F.lit(value), d=F.lit(float(value)))
    if isinstance(value, float):
        return _make(F.lit("double"), d=F.lit(value))
    return _make(F.lit("string"), s=F.lit(str(value)))


def _variant_value(v: Column, level: int) -> Value:
    t = F.schema_of_variant(v)
    kind = (F.when(v.isNull() | (t == "VOID"), _null())
            .when(t.isin(*_INTS), F.lit("int"))
            .when(t.isin("DOUBLE", "FLOAT") | t.startswith("DECIMAL"), F.lit("double"))
            .when(t == "STRING", F.lit("string"))
            .when(t == "BOOLEAN", F.lit("bool"))
            .otherwise(F.lit("other")))
    return _make(
        kind,
        b=F.when(kind == "bool", F.try_variant_get(v, "$", "boolean")),
        i=F.when(kind == "int", F.try_variant_get(v, "$", "bigint")),
        d=F.when(kind.isin("int", "double"), F.try_variant_get(v, "$", "double")),
        s=F.when(kind == "string", F.try_variant_get(v, "$", "string")), level=level)


def _finite(d: Column) -> Column:
    return F.when(~F.isnan(d) & (F.abs(d) != F.lit(float("inf"))), d)


def _arith(op: str, a: Value, b: Value) -> Value:
    ints = (a.kind == "int") & (b.kind == "int")
    numbers = a.kind.isin("int", "double") & b.kind.isin("int", "double")
    if op in ("+", "-", "*"):
        fn = {"+": F.try_add, "-": F.try_subtract, "*": F.try_multiply}[op]
        i = fn(a.i, b.i)
        d = _finite({"+": a.d + b.d, "-": a.d - b.d, "*": a.d * b.d}[op])
    elif op == "/":
        overflow = (a.i == F.lit(-(2**63))) & (b.i == -1)
        i = F.when((b.i != 0) & ~overflow, F.call_function("div", a.i, b.i))
        d = _finite(F.when(b.d != 0, a.d / b.d))
    else:
        i = F.when(b.i != 0, F.when(b.i == -1, F.lit(0)).otherwise(a.i % b.i))
        d = _finite(F.when(b.d != 0, a.d % b.d))
    kind = (F.when(ints & i.isNotNull(), F.lit("int"))
            .when(ints, _null())
            .when(numbers & d.isNotNull(), F.lit("double")))
    s = None
    if op == "+":
        strings = (a.kind == "string") & (b.kind == "string")
        kind = F.when(strings, F.lit("string")).otherwise(kind)
        s = F.when(strings, F.concat(a.s, b.s))
    return _make(kind, i=F.when(kind == "int", i),
                 d=F.when(kind == "int", i.cast("double")).when(kind == "double", d), s=s,
                 level=max(a.level, b.level))


def _compare(op: str, a: Value, b: Value) -> Column:
    """A boolean column, NULL when unknown (different kinds, unknown operands)."""
    def cmp(x: Column, y: Column) -> Column:
        return {"=": x == y, "<>": x != y, "!=": x != y, "<": x < y, "<=": x <= y,
                ">": x > y, ">=": x >= y}[op]

    same = a.kind == b.kind
    numbers = a.kind.isin("int", "double") & b.kind.isin("int", "double")
    result = (F.when((a.kind == "int") & same, cmp(a.i, b.i))
              .when(numbers, cmp(a.d, b.d))
              .when(same & (a.kind == "string"), cmp(a.s, b.s)))
    if op in ("=", "<>", "!="):
        result = result.when(same & (a.kind == "bool"), cmp(a.b, b.b))
    return result


def _boolean(value: Value) -> Column:
    return F.when(value.kind == "bool", value.b)


def _as_variant(value: Value) -> Column:
    return (F.when(value.kind == "int", value.i.cast("variant"))
            .when(value.kind == "double", value.d.cast("variant"))
            .when(value.kind == "string", value.s.cast("variant"))
            .when(value.kind == "bool", value.b.cast("variant")))


def _as_text(value: Value) -> Column:
    return (F.when(value.kind == "string", value.s)
            .when(value.kind == "int", value.i.cast("string"))
            .when(value.kind == "double", value.d.cast("string"))
            .when(value.kind == "bool", F.when(value.b, F.lit("true")).otherwise("false")))


class RulePlan:
    """The columns that evaluate a set of rules: ``add_to(df)`` adds them, level by level,
    after which the columns returned by ``filter_column`` and ``action_columns`` are valid;
    ``temporary`` names the ones to drop."""

    def __init__(self, prefix: str = "_rule") -> None:
        self.prefix = prefix
        self.levels: list[dict[str, Column]] = []
        self.temporary: list[str] = []
        self._cache: dict[Any, Any] = {}

    def add_to(self, df: DataFrame) -> DataFrame:
        for columns in self.levels:
            df = df.withColumns(columns)
        return df

    def _bind_columns(self, columns: list[Column], level: int) -> list[Column]:
        while len(self.levels) <= level:
            self.levels.append({})
        names = [f"{self.prefix}{len(self.temporary) + k}" for k in range(len(columns))]
        self.levels[level].update(dict(zip(names, columns, strict=True)))
        self.temporary.extend(names)
        return [F.col(n) for n in names]

    def bind(self, value: Value) -> Value:
        """``value`` as columns of its own, one level above its inputs."""
        kind, b, i, d, s = self._bind_columns(
            [value.kind, value.b, value.i, value.d, value.s], value.level)
        return Value(kind, b, i, d, s, level=value.level + 1)

    def filter_column(self, node: Node) -> Column:
        """True where ``node`` matches (only TRUE matches, S15.5); never NULL."""
        value = _Compiler(self, _Message(F.col(PROPS), 0, {}, "base")).value(node)
        return F.coalesce(_boolean(value), F.lit(False))

    def action_columns(self, actions: tuple[Action, ...], rule_name: str) -> dict[str, Column]:
        """The columns a rule's copy replaces (S15.6): ``application_properties``, with
        ``RuleName`` set (S15.2), and each system field the actions set; statements apply
        in order, each seeing the ones before it (as ``core.rule_eval.apply_actions``)."""
        props = F.coalesce(F.col(PROPS), F.create_map().cast("map<string,variant>"))
        message = _Message(props, 0, {}, f"action{len(self.temporary)}")
        for n, action in enumerate(actions):
            message = _Compiler(self, message).apply(action, n)
        named = F.map_concat(
            F.map_filter(message.props, lambda k, _: F.lower(k) != F.lit("rulename")),
            F.create_map(F.lit("RuleName"), F.lit(rule_name).cast("variant")))
        return {**message.fields, "application_properties": F.to_variant_object(named)}


@dataclass(frozen=True)
class _Message:
    """The message a node is evaluated on: its user properties (a map column available
    from ``level``), its changed system fields, and a key naming this state."""

    props: Column
    level: int
    fields: dict[str, Column]
    key: str


class _Compiler:
    def __init__(self, plan: RulePlan, message: _Message) -> None:
        self.plan = plan
        self.message = message

    def entries(self, name: str) -> Column:
        lowered = name.lower()
        return F.map_filter(self.message.props, lambda k, _: F.lower(k) == F.lit(lowered))

    def prop(self, prop: Property) -> Value:
        if prop.scope == "sys":
            column = self.message.fields.get(prop.name, F.col(f"`{prop.name}`"))
            return _make(F.when(column.isNotNull(), F.lit("string")), s=column,
                         level=self.message.level)
        value = F.get(F.map_values(self.entries(prop.name)), 0)
        return self.plan.bind(_variant_value(value, self.message.level))

    def predicate(self, node: Node) -> tuple[Column, int] | None:
        """The boolean column of a predicate node and its level, or None."""
        if isinstance(node, Binary) and node.op not in ("+", "-", "*", "/", "%"):
            a, b = self.value(node.left), self.value(node.right)
            return _compare(node.op, a, b), max(a.level, b.level)
        if isinstance(node, Logical):
            a, b = self.value(node.left), self.value(node.right)
            both = (_boolean(a) & _boolean(b)) if node.op == "and" \
                else (_boolean(a) | _boolean(b))
            return both, max(a.level, b.level)
        if isinstance(node, Not):
            a = self.value(node.operand)
            return ~_boolean(a), a.level
        if isinstance(node, IsNull):
            a = self.value(node.operand)
            return (a.kind.isNotNull() if node.negated else a.kind.isNull()), a.level
        if isinstance(node, Exists):
            if node.prop.scope == "sys":
                return self.prop(node.prop).kind.isNotNull(), self.message.level
            present = F.coalesce(F.size(self.entries(node.prop.name)) > 0, F.lit(False))
            return present, self.message.level
        if isinstance(node, InList):
            a = self.value(node.operand)
            items = [self.value(item) for item in node.items]
            found = F.lit(False)
            for item in items:
                found = found | _compare("=", a, item)
            return (~found if node.negated else found), max([a.level] + [x.level for x in items])
        if isinstance(node, Like):
            a = self.value(node.operand)
            hit = F.when(a.kind == "string", a.s.rlike(
                "(?s)" + like_regex(node.pattern, node.escape)))
            return (~hit if node.negated else hit), a.level
        return None

    def value(self, node: Node) -> Value:
        key = (repr(node), self.message.key)  # repr: Literal(True) == Literal(1) as data
        if key not in self.plan._cache or isinstance(node, NewId):
            self.plan._cache[key] = self._compute(node)
        found: Value = self.plan._cache[key]
        return found

    def _compute(self, node: Node) -> Value:
        if isinstance(node, Literal):
            return _literal(node.value)
        if isinstance(node, Property):
            return self.prop(node)
        if isinstance(node, NewId):
            return self.plan.bind(_make(F.lit("string"), s=F.expr("uuid()"),
                                        level=self.message.level))
        predicate = self.predicate(node)
        if predicate is not None:
            column, level = predicate
            return self.plan.bind(_make(F.when(column.isNotNull(), F.lit("bool")), b=column,
                                        level=level))
        if isinstance(node, Unary):
            a = self.value(node.operand)
            if node.op == "+":
                return _make(F.when(a.kind.isin("int", "double"), a.kind), i=a.i, d=a.d,
                             level=a.level)
            return self.plan.bind(_arith("-", _literal(0), a))
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
                return _Message(m.props, m.level, {**m.fields, prop.name: _null().cast("string")},
                                key)
            value = self.value(action.value)
            [text] = self.plan._bind_columns([_as_text(value)], value.level)
            return _Message(m.props, max(m.level, value.level + 1),
                            {**m.fields, prop.name: text}, key)
        lowered = prop.name.lower()
        rest = F.map_filter(m.props, lambda k, _: F.lower(k) != F.lit(lowered))
        level = m.level
        if isinstance(action, Remove):
            props = rest
        else:
            value = self.value(action.value)
            level = max(level, value.level)
            existing = F.get(F.map_keys(self.entries(prop.name)), 0)
            props = F.map_concat(rest, F.create_map(F.coalesce(existing, F.lit(prop.name)),
                                                    _as_variant(value)))
        [bound] = self.plan._bind_columns([props], level)
        return _Message(bound, level + 1, m.fields, key)
