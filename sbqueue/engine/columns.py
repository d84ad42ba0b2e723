"""Compile ``sbqueue.core.expr`` trees to Spark Columns: one rule, two evaluators.

The core evaluates an outcome on plain rows (tests); here the same tree becomes a Column,
so an outcome is applied to a DataFrame as one ``select`` (``project``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from sbqueue.core.expr import Col, Expr, Lit, Op, When

__all__ = ["project", "to_column"]

_BINARY = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "+": lambda a, b: a + b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
}


def _literal(value: Any) -> Column:
    if isinstance(value, datetime):
        return F.lit(value).cast("timestamp")
    return F.lit(value)


def to_column(expr: Expr) -> Column:
    """The Spark Column computing ``expr`` (same null rules as ``Expr.evaluate``)."""
    if isinstance(expr, Col):
        return F.col(f"`{expr.name}`")
    if isinstance(expr, Lit):
        return _literal(expr.value)
    if isinstance(expr, When):
        column: Any = F
        for condition, value in expr.branches:
            column = column.when(to_column(condition), to_column(value))
        return column.otherwise(to_column(expr.default))  # type: ignore[no-any-return]
    if isinstance(expr, Op):
        args = [to_column(a) for a in expr.args]
        if expr.name in _BINARY:
            return _BINARY[expr.name](args[0], args[1])  # type: ignore[no-any-return]
        if expr.name == "not":
            return ~args[0]
        if expr.name == "is_null":
            return args[0].isNull()
        if expr.name == "is_not_null":
            return args[0].isNotNull()
        if expr.name == "coalesce":
            return F.coalesce(*args)
        if expr.name == "greatest":
            return F.greatest(*args)
    raise ValueError(f"cannot compile {expr!r}")


def project(df: DataFrame, outcome: Mapping[str, Expr], types: Mapping[str, DataType]) -> DataFrame:
    """``df`` with every column of ``outcome`` replaced (or added) at once: each new value is
    computed from the row as read, never from another new value."""
    new = {name: to_column(expr) for name, expr in outcome.items()}
    for name in new:
        if name in types:
            new[name] = new[name].cast(types[name])
    kept = [F.col(f"`{c}`") for c in df.columns if c not in new]
    return df.select(*kept, *[c.alias(n) for n, c in new.items()])
