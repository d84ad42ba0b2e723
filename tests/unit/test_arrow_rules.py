"""Decision 017: a rule compiled to Arrow (``engine.columns.to_arrow``) gives what
``Expr.evaluate`` gives on every row, NULLs included: a forwarding window is decided with
the rule a receive applies (S5.6, S8.2, S8.4, S13.3). No Spark."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from sbqueue.core.expr import coalesce, col, greatest, lit, when
from sbqueue.core.forwarding import MAX_HOPS, window_forwardable
from sbqueue.core.transitions import ReceiveContext, deliverable
from sbqueue.engine.columns import arrow_values, to_arrow

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
TIME = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema([("state", pa.string()), ("locked_until_utc", TIME),
                    ("scheduled_enqueue_time_utc", TIME), ("expires_at_utc", TIME),
                    ("delivery_count", pa.int32()), ("_record_at", TIME),
                    ("hop_count", pa.int32())])
TIMES = (None, NOW - timedelta(minutes=1), NOW, NOW + timedelta(minutes=1))


def _ctx() -> ReceiveContext:
    return ReceiveContext(now=NOW, locked_until=NOW + timedelta(minutes=1), peek_lock=True,
                          max_delivery_count=3, dead_letter_on_expiry=False, main_queue=True)


def _rows() -> list[dict[str, object]]:
    grid = itertools.product(("Active", "Deferred", None), TIMES, TIMES, TIMES, (0, 3, None),
                             (None, NOW - timedelta(minutes=2)), (None, 0, MAX_HOPS))
    names = SCHEMA.names
    return [dict(zip(names, values, strict=True)) for values in grid]


@pytest.mark.parametrize("rule", [deliverable(_ctx()), window_forwardable(_ctx())],
                         ids=["deliverable", "window_forwardable"])
def test_a_rule_in_arrow_agrees_with_the_python_evaluator(rule) -> None:
    rows = _rows()
    table = pa.Table.from_pylist(rows, SCHEMA)
    assert arrow_values(table, rule).to_pylist() == [rule.evaluate(r) for r in rows]


def test_null_rules_coalesce_and_greatest_agree() -> None:
    rows = [{"a": a, "b": b} for a in (None, 1, 5) for b in (None, 2, 5)]
    table = pa.Table.from_pylist(rows, pa.schema([("a", pa.int64()), ("b", pa.int64())]))
    for rule in (coalesce(col("a"), col("b")), greatest(col("a"), col("b")),
                 (col("a") + col("b")) > lit(4), ~(col("a") == col("b")),
                 (col("a") < col("b")) | col("a").is_null()):
        assert arrow_values(table, rule).to_pylist() == [rule.evaluate(r) for r in rows]


def test_a_rule_arrow_cannot_compile_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="cannot compile"):
        to_arrow(when(col("a") > 1, "x").otherwise("y"))
