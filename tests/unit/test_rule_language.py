"""The rule language parsed and evaluated in Python (SPEC S15.3-S15.7), without Spark."""

from __future__ import annotations

import pytest
from rule_cases import ACTIONS, CASES, MESSAGES

from sbqueue.core.rule_eval import apply_actions, matches, message_view
from sbqueue.core.rule_syntax import parse_action, parse_filter
from sbqueue.core.rules import CorrelationRuleFilter, FalseRuleFilter, TrueRuleFilter
from sbqueue.exceptions import InvalidOperationError


def _view(name: str):  # type: ignore[no-untyped-def]
    fields, props = MESSAGES[name]
    return message_view(fields, props)


@pytest.mark.parametrize(("text", "parameters", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_s15_4_s15_5_filter_table(text, parameters, expected) -> None:
    """S15.4 grammar, S15.5 three-valued logic: each case of the shared table."""
    tree = parse_filter(text, parameters)
    assert {m for m in MESSAGES if matches(tree, _view(m))} == expected


@pytest.mark.parametrize(("text", "props", "system"), ACTIONS, ids=[a[0] for a in ACTIONS])
def test_s15_6_actions(text, props, system) -> None:
    copy = apply_actions(parse_action(text), _view("red"))
    for key, value in props.items():
        assert copy.user.get(key) == value
    for key, value in system.items():
        assert copy.system[key] == value
    assert _view("red").user["Color"] == "Red"  # the original is untouched


@pytest.mark.parametrize(("text", "where"), [
    ("color = ", "end of text"),
    ("color == 'x'", "column 8"),
    ("color = 'x' AND", "end of text"),
    ("color ~ 1", "column 7"),
    ("sys.Nope = 1", "column 5"),
    ("x = @missing", "@missing"),
    ("bogus(1) = 1", "bogus"),
    ("x LIKE 5", "LIKE takes a string"),
    ("x = 99999999999999999999", "64 bits"),
    ("'unterminated = 1", "column 1"),
    ("x" * 1025, "at most 1024"),
    ("", "required"),
])
def test_s15_7_invalid_filter_is_refused_with_its_position(text: str, where: str) -> None:
    with pytest.raises(InvalidOperationError, match="S15") as caught:
        parse_filter(text)
    assert where in str(caught.value)


def test_s15_7_invalid_action_is_refused() -> None:
    with pytest.raises(InvalidOperationError, match="column"):
        parse_action("SET = 1")
    with pytest.raises(InvalidOperationError, match="column"):
        parse_action("DELETE x")


def test_s15_7_filter_text_is_data() -> None:
    """Text that would be code in Spark SQL or Python is only ever a syntax error or a
    plain comparison."""
    for text in ("1 = 1; DROP TABLE x", "__import__('os').system('true')",
                 "x = 1 --", "x = `y`"):
        with pytest.raises(InvalidOperationError):
            parse_filter(text)
    tree = parse_filter("x = ') OR 1=1 --'")
    assert not matches(tree, message_view({}, {"x": "anything"}))


def test_s15_3_correlation_filter() -> None:
    rule = CorrelationRuleFilter(correlation_id="c1", label="Red", properties={"n": 5})
    tree = rule.tree()
    assert matches(tree, _view("red"))
    assert not matches(tree, _view("blue"))
    assert not matches(CorrelationRuleFilter(properties={"color": "red"}).tree(), _view("red"))
    with pytest.raises(InvalidOperationError, match=r"S15\.3"):
        CorrelationRuleFilter().tree()


def test_true_and_false_filters() -> None:
    assert matches(TrueRuleFilter().tree(), _view("bare"))
    assert not matches(FalseRuleFilter().tree(), _view("bare"))
