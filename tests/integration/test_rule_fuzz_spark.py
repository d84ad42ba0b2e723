"""The rule language fuzzed against Spark (SPEC S15.4, S15.5): drawn filters evaluated on drawn
messages by the Spark projection of ``engine.topics.rules``, every pair in one job, compared
row by row with the Python evaluator (``core.rule_eval``), unknown included.

The cases are drawn by Hypothesis (tests/rule_fuzz.py), derandomized: the same cases on every
run, so a disagreement found once is found again. Hypothesis does not shrink them (one Spark
job per attempt would take minutes); the failure lists the smallest disagreements first.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import VariantVal
from pyspark.sql.types import IntegerType, StringType, StructField, StructType, VariantType
from rule_fuzz import (
    ARITH_OPS,
    COMPARE_OPS,
    INT_MAX,
    INT_MIN,
    SYSTEM_FIELDS,
    close_pairs,
    edge_values,
    filters,
    system_fields,
    user_properties,
)

from sbqueue.core.rule_eval import evaluate, message_view
from sbqueue.core.rule_syntax import MAX_NESTING, Not, parse_filter
from sbqueue.engine.topics.rules import RulePlan, with_props
from sbqueue.exceptions import InvalidOperationError
from sbqueue.store.variant import encode_object

pytestmark = pytest.mark.spark

T = TypeVar("T")

# Filters over properties a and b, for the rows drawn as close pairs; an arithmetic result
# is seen through a comparison (a value alone as a filter is unknown either way).
OPERATOR_FILTERS = [f"a {op} b" for op in COMPARE_OPS] + [
    f"a {op} b >= a" for op in ARITH_OPS] + [f"(a {op} b) IS NULL" for op in ARITH_OPS] + [
    "-a = -b", "+a = b", "-a IS NULL", "+a IS NULL", "a IN (b, 1)", "a NOT IN (b)",
    "a LIKE 'a'", "a LIKE '_'", "a LIKE 'a_'", "a LIKE '%'", "a LIKE ''", "a LIKE 'Red'",
    "a NOT LIKE 'a%'", "a LIKE '50!%' ESCAPE '!'"]


def _draw(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    """``count`` examples of ``strategy`` as Hypothesis generates them, derandomized."""
    drawn: list[T] = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(example: T) -> None:
        drawn.append(example)

    collect()
    return drawn


# Pairs every run has, whatever is drawn.
EDGE_PAIRS = [(math.nan, math.nan), (math.nan, 1), (1.5, math.nan), (math.inf, 1),
              (-math.inf, math.inf), (2**53 + 1, 2.0**53), (INT_MAX, 1), (INT_MIN, -1),
              (-0.0, 0.0), ("a\r", "a"), ("a\u2028", "a"), ("\x85", ""), ("a\n", "a")]


def _messages() -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    drawn = _draw(st.tuples(system_fields, st.none() | user_properties(edge_values)), 25)
    pairs = EDGE_PAIRS + _draw(close_pairs, 50)
    return drawn + [({}, {"a": a, "b": b}) for a, b in pairs]


def _size(disagreement: tuple[Any, ...]) -> int:
    size: int = disagreement[0]
    return size


def _truth(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def test_s15_5_spark_and_python_agree_on_drawn_filters(spark, spark_jobs) -> None:
    """S15.4, S15.5: ~65 filters (35 drawn, 31 of one operator each) on ~90 messages (25
    drawn, the rest pairs of edge values in properties a and b): ~6,000 (filter, message)
    pairs, each true, false or unknown alike in Spark and in Python. Unknown is told from
    false as Spark sees it: neither the filter nor its NOT matches."""
    cases = [(c.text, c.parameters) for c in _draw(filters(max_depth=3), 35)]
    cases += [(text, {}) for text in OPERATOR_FILTERS]
    trees = [parse_filter(text, parameters) for text, parameters in cases]
    messages = _messages()

    schema = StructType([StructField("row", IntegerType()),
                         StructField("application_properties", VariantType()),
                         *[StructField(f, StringType()) for f in SYSTEM_FIELDS]])
    data = [(i, None if props is None else VariantVal(*encode_object(props)),
             *[fields.get(f) for f in SYSTEM_FIELDS])
            for i, (fields, props) in enumerate(messages)]
    # cached, as a send's rows are not a local relation Spark would fold while planning
    df = with_props(spark.createDataFrame(data, schema)).cache()
    df.count()
    try:
        plan = RulePlan()
        columns = []
        for k, tree in enumerate(trees):
            columns.append(plan.filter_column(tree).alias(f"m{k}"))
            columns.append(plan.filter_column(Not(tree)).alias(f"n{k}"))
        rows, jobs = spark_jobs(lambda: plan.add_to(df).select("row", *columns).collect())
    finally:
        df.unpersist()
    assert jobs == 1  # every pair in one projection, as a topic send evaluates its rules

    disagreements = []
    for row in rows:
        fields, props = messages[row["row"]]
        view = message_view(fields, props)
        for k, (text, parameters) in enumerate(cases):
            in_python = _truth(evaluate(trees[k], view))
            in_spark = True if row[f"m{k}"] else False if row[f"n{k}"] else None
            if in_python is not in_spark:
                disagreements.append((len(text) + len(repr(props)), text, parameters, fields,
                                      props, in_python, in_spark))
    assert len(rows) == len(messages)
    assert not disagreements, f"{len(disagreements)} disagreements, smallest first:\n" + "\n".join(
        f"{text!r} {parameters} on {fields} {props}: Python {py}, Spark {sp}"
        for _, text, parameters, fields, props, py, sp in sorted(disagreements, key=_size)[:12])


@pytest.mark.parametrize("unit", ["-", "NOT ", "+1+", "a = 1 OR "])
def test_s15_7_the_deepest_filter_accepted_compiles(spark, unit: str) -> None:
    """S15.7: a filter nested as deep as the parser accepts (MAX_NESTING) also compiles to
    Spark columns and evaluates in Python: the depth limit keeps every recursion of the
    three within Python's limit (no Spark job is run)."""
    n = min(1024 // len(unit), MAX_NESTING + 5)
    while True:  # the deepest of this shape the parser takes
        text = unit * n + "x"
        try:
            tree = parse_filter(text)
            break
        except InvalidOperationError as exc:
            assert f"nested more than {MAX_NESTING}" in str(exc) or "at most" in str(exc)
            n -= 1
    assert n >= MAX_NESTING // 2  # the limit, not some other error, stopped the longer ones
    RulePlan().filter_column(tree)
    evaluate(tree, message_view({}, {"x": 1}))
