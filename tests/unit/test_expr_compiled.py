"""A rule compiled to one Python function (``Expr.compiled``, issue 45: a receive decided
on the driver applies its rules to every row it read) gives what the interpreter
(``Expr.evaluate``) gives, NULLs included, for the rules a receive and a settlement apply
(S5.2-S5.6, S6.1-S6.7, S8.2, S8.4, S10.1). No Spark."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sbqueue.core.expr import coalesce, col, greatest, lit, when
from sbqueue.core.transitions import (
    DELIVERABLE,
    Lane,
    ReceiveContext,
    SettleContext,
    deliverable,
    receive_outcome,
    receive_rules,
    settle_outcome,
    settle_valid,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
TIMES = st.sampled_from([None, NOW - timedelta(minutes=1), NOW, NOW + timedelta(minutes=1)])
FLAGS = st.sampled_from([None, True, False])
ROWS = st.fixed_dictionaries({
    "origin": st.sampled_from(["ledger", "inbox"]),
    "lane": st.sampled_from([None, Lane.MAIN, Lane.DEAD_LETTER, Lane.SCHEDULED]),
    "state": st.sampled_from([None, "Active", "Deferred", "Scheduled"]),
    "delivery_count": st.sampled_from([None, 0, 2, 3]),
    "lock_token": st.sampled_from([None, "t1", "t2"]),
    "locked_until_utc": TIMES, "expires_at_utc": TIMES, "scheduled_enqueue_time_utc": TIMES,
    "_record_at": TIMES, "row_version": st.sampled_from([0, 4]),
    "dead_letter_reason": st.sampled_from([None, "r"]), "session_id": st.sampled_from([None, "s"]),
    "_picked": FLAGS, "_passed": FLAGS, "_void": FLAGS, "_new_token": st.just("new"),
    "_token": st.sampled_from([None, "t1"]),
})
RECEIVES = st.builds(
    ReceiveContext, now=st.just(NOW), locked_until=st.just(NOW + timedelta(seconds=65)),
    peek_lock=st.booleans(), max_delivery_count=st.sampled_from([1, 3]),
    dead_letter_on_expiry=st.booleans(), main_queue=st.booleans(),
    requires_session=st.booleans(), transfer_token=st.sampled_from([None, "batch"]))
SETTLES = st.builds(SettleContext, now=st.just(NOW),
                    kind=st.sampled_from(["complete", "abandon", "defer", "dead_letter", "renew"]),
                    max_delivery_count=st.sampled_from([1, 3]),
                    renewed_until=st.just(NOW + timedelta(minutes=5)),
                    reason=st.sampled_from([None, "why"]), description=st.just(None))


def _both(rules: dict[str, Any], row: dict[str, Any]) -> None:
    for name, rule in rules.items():
        assert rule.compiled()(row) == rule.evaluate(row), name


@settings(max_examples=400, deadline=None)
@given(ctx=RECEIVES, row=ROWS)
def test_a_receives_rules_compiled_agree_with_the_interpreter(ctx: ReceiveContext,
                                                              row: dict[str, Any]) -> None:
    _both({**receive_outcome(ctx), "deliverable": deliverable(ctx)}, row)


@settings(max_examples=200, deadline=None)
@given(ctx=SETTLES, row=ROWS)
def test_a_settlements_rules_compiled_agree_with_the_interpreter(ctx: SettleContext,
                                                                 row: dict[str, Any]) -> None:
    _both({**settle_outcome(ctx), "valid": settle_valid(ctx.now)}, row)


def test_null_rules_hold_and_each_node_is_evaluated_once() -> None:
    rules = {"and": (col("a") > 1) & (col("b") > 1), "or": (col("a") > 1) | (col("b") > 1),
             "not": ~(col("a") == col("b")), "sum": (col("a") + col("b")) >= lit(4),
             "coalesce": coalesce(col("a"), col("b"), lit(9)),
             "greatest": greatest(col("a"), col("b")), "null": col("a").is_null(),
             "case": when(col("a") > col("b"), "a").when(col("b").is_not_null(), col("b"))
             .otherwise(lit(None))}
    for a in (None, 1, 5):
        for b in (None, 2, 5):
            _both(rules, {"a": a, "b": b})
    assert rules["and"].compiled()({"a": None, "b": 0}) is False  # NULL AND FALSE
    assert rules["or"].compiled()({"a": None, "b": 2}) is True  # NULL OR TRUE
    assert rules["not"].compiled()({"a": None, "b": 2}) is None


def test_a_tree_of_the_same_shape_compiles_once_with_its_own_literals() -> None:
    early, late = (col("t") <= lit(NOW)), (col("t") <= lit(NOW + timedelta(hours=1)))
    row = {"t": NOW + timedelta(minutes=1)}
    assert (early.compiled()(row), late.compiled()(row)) == (False, True)
    assert early.compiled() is early.compiled()


@settings(max_examples=200, deadline=None)
@given(ctx=RECEIVES, row=ROWS, minutes=st.integers(-5, 5))
def test_a_receives_rules_from_the_template_are_those_of_its_own_times(
        ctx: ReceiveContext, row: dict[str, Any], minutes: int) -> None:
    """``receive_rules`` compiles once per context apart from its times and fills them in:
    the same results as the rules built for the context itself, at any time."""
    ctx = replace(ctx, now=NOW + timedelta(minutes=minutes),
                  locked_until=NOW + timedelta(minutes=minutes + 1))
    rules = receive_rules(ctx)
    built = {**receive_outcome(ctx), DELIVERABLE: deliverable(ctx)}
    assert rules.keys() == built.keys()
    for name, rule in built.items():
        assert rules[name](row) == rule.evaluate(row), name


def test_a_node_held_in_several_places_is_computed_once() -> None:
    shared = col("a") > lit(1)
    rule = when(shared, "x").when(~shared & col("b").is_null(), "y").otherwise(shared)
    for a in (None, 0, 2):
        for b in (None, 1):
            _both({"rule": rule}, {"a": a, "b": b})
    reads = _Counting({"a": 2, "b": None})
    assert rule.compiled()(reads) == "x" and reads.asked == ["a"]


class _Counting(dict[str, Any]):
    """A row that keeps the names read from it."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(values)
        self.asked: list[str] = []

    def __getitem__(self, name: str) -> Any:
        self.asked.append(name)
        return super().__getitem__(name)
