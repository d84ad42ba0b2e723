"""The rule table of tests/rule_cases.py compiled to Spark Columns (SPEC S15.3-S15.6):
the same matches and the same action results as the Python evaluator."""

from __future__ import annotations

import json

import pytest
from rule_cases import ACTIONS, CASES, MESSAGES

from sbqueue.core.rule_syntax import parse_action, parse_filter
from sbqueue.core.rules import CorrelationRuleFilter
from sbqueue.engine.topics.rules import RulePlan, with_props

pytestmark = pytest.mark.spark

_FIELDS = ["message_id", "subject", "correlation_id", "to", "reply_to", "session_id",
           "reply_to_session_id", "content_type"]


@pytest.fixture(scope="module")
def messages(spark):
    rows = [(name, json.dumps(props), *[fields.get(f) for f in _FIELDS])
            for name, (fields, props) in MESSAGES.items()]
    schema = "name string, props string, " + ", ".join(f"`{f}` string" for f in _FIELDS)
    df = spark.createDataFrame(rows, schema).selectExpr(
        "*", "parse_json(props) AS application_properties").drop("props")
    return with_props(df).cache()


def test_s15_4_s15_5_the_filter_table_in_spark(messages) -> None:
    """S15.4, S15.5: every case in one projection (one job), as a topic send evaluates
    its rules."""
    plan = RulePlan()
    columns = [plan.filter_column(parse_filter(text, params)).alias(f"c{i}")
               for i, (text, params, _) in enumerate(CASES)]
    rows = plan.add_to(messages).select("name", *columns).collect()
    for i, (text, _, expected) in enumerate(CASES):
        got = {r["name"] for r in rows if r[f"c{i}"]}
        assert got == expected, text


def test_s15_3_correlation_filter_in_spark(messages) -> None:
    tree = CorrelationRuleFilter(correlation_id="c1", label="Red", properties={"n": 5}).tree()
    plan = RulePlan()
    match = plan.filter_column(tree)
    assert [r.name for r in plan.add_to(messages).where(match).collect()] == ["red"]


def test_s15_6_actions_in_spark(messages) -> None:
    red = messages.where("name = 'red'")
    for text, props, system in ACTIONS:
        plan = RulePlan()
        columns = plan.action_columns(parse_action(text), "rule-1")
        row = plan.add_to(red).withColumns(columns).selectExpr(
            "to_json(application_properties) AS props", *[f"`{f}`" for f in _FIELDS]).first()
        got = json.loads(row.props)
        assert got["RuleName"] == "rule-1", text  # S15.2: the copy names its rule
        for key, value in props.items():
            assert got.get(key) == value, (text, key, got)
        for key, value in system.items():
            assert row[key] == value, text
