"""A tiny expression language for row transformations, with SQL's null rules.

Why: every state change of a message (deliver, retire, settle) must be written once, be
testable on plain Python rows without Spark, and run inside Spark as one projection. A rule
is therefore an ``Expr`` tree: ``evaluate(row)`` runs it on a mapping, and
``sbqueue.engine.columns.to_sql`` compiles the same tree to Spark SQL.

Null semantics follow Spark SQL: comparisons and arithmetic with NULL give NULL; AND / OR /
NOT are three-valued; ``when`` treats a NULL condition as false.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Expr", "coalesce", "col", "greatest", "lit", "when"]

Row = Mapping[str, Any]


class Expr:
    """A node of an expression tree; Python operators build bigger trees."""

    def evaluate(self, row: Row) -> Any:
        raise NotImplementedError

    # comparisons and arithmetic
    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return Op("==", (self, _wrap(other)))

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return Op("!=", (self, _wrap(other)))

    def __lt__(self, other: Any) -> Expr:
        return Op("<", (self, _wrap(other)))

    def __le__(self, other: Any) -> Expr:
        return Op("<=", (self, _wrap(other)))

    def __gt__(self, other: Any) -> Expr:
        return Op(">", (self, _wrap(other)))

    def __ge__(self, other: Any) -> Expr:
        return Op(">=", (self, _wrap(other)))

    def __add__(self, other: Any) -> Expr:
        return Op("+", (self, _wrap(other)))

    # three-valued logic
    def __and__(self, other: Any) -> Expr:
        return Op("and", (self, _wrap(other)))

    def __or__(self, other: Any) -> Expr:
        return Op("or", (self, _wrap(other)))

    def __invert__(self) -> Expr:
        return Op("not", (self,))

    def is_null(self) -> Expr:
        return Op("is_null", (self,))

    def is_not_null(self) -> Expr:
        return Op("is_not_null", (self,))

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Col(Expr):
    name: str

    def evaluate(self, row: Row) -> Any:
        return row[self.name]


@dataclass(frozen=True, eq=False)
class Lit(Expr):
    value: Any

    def evaluate(self, row: Row) -> Any:
        return self.value


@dataclass(frozen=True, eq=False)
class Op(Expr):
    name: str
    args: tuple[Expr, ...]

    def evaluate(self, row: Row) -> Any:
        if self.name == "and":
            return _and(self.args[0].evaluate(row), self.args[1].evaluate(row))
        if self.name == "or":
            return _or(self.args[0].evaluate(row), self.args[1].evaluate(row))
        values = [a.evaluate(row) for a in self.args]
        if self.name == "is_null":
            return values[0] is None
        if self.name == "is_not_null":
            return values[0] is not None
        if self.name == "coalesce":
            return next((v for v in values if v is not None), None)
        if self.name == "greatest":
            present = [v for v in values if v is not None]
            return max(present) if present else None
        if any(v is None for v in values):
            return None
        return _STRICT[self.name](*values)


@dataclass(frozen=True, eq=False)
class When(Expr):
    """CASE WHEN c1 THEN v1 ... ELSE otherwise END."""

    branches: tuple[tuple[Expr, Expr], ...]
    default: Expr

    def when(self, condition: Expr, value: Any) -> When:
        return When((*self.branches, (condition, _wrap(value))), self.default)

    def otherwise(self, value: Any) -> When:
        return When(self.branches, _wrap(value))

    def evaluate(self, row: Row) -> Any:
        for condition, value in self.branches:
            if condition.evaluate(row) is True:
                return value.evaluate(row)
        return self.default.evaluate(row)


_STRICT: dict[str, Callable[..., Any]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "+": lambda a, b: a + b,
    "not": lambda a: not a,
}


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _wrap(value: Any) -> Expr:
    return value if isinstance(value, Expr) else Lit(value)


def col(name: str) -> Expr:
    return Col(name)


def lit(value: Any) -> Expr:
    return Lit(value)


def when(condition: Expr, value: Any) -> When:
    return When(((condition, _wrap(value)),), Lit(None))


def coalesce(*values: Any) -> Expr:
    return Op("coalesce", tuple(_wrap(v) for v in values))


def greatest(*values: Any) -> Expr:
    return Op("greatest", tuple(_wrap(v) for v in values))
