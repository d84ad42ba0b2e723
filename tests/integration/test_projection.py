"""Issue 5 point 3: one rule, two evaluators. Each state change evaluated on plain rows
(``Expr.evaluate``) and the same tree compiled to Spark SQL (``engine.columns.project``) give
the same values, row by row, including NULL cases and user text that needs escaping
(S5.2, S6.1-S6.7, S8.2)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pyspark.sql import types as T

from sbqueue.core.transitions import (
    Lane,
    ReceiveContext,
    SettleContext,
    deliverable,
    receive_outcome,
    settle_outcome,
    settle_valid,
)
from sbqueue.engine.columns import project, to_column, to_sql

NOW = datetime(2026, 11, 22, 12, 0, 0, 123456, tzinfo=timezone.utc)
SCHEMA = T.StructType([
    T.StructField("origin", T.StringType()), T.StructField("lane", T.StringType()),
    T.StructField("state", T.StringType()), T.StructField("delivery_count", T.IntegerType()),
    T.StructField("lock_token", T.StringType()),
    T.StructField("locked_until_utc", T.TimestampType()),
    T.StructField("expires_at_utc", T.TimestampType()),
    T.StructField("scheduled_enqueue_time_utc", T.TimestampType()),
    T.StructField("row_version", T.LongType()), T.StructField("dead_letter_reason", T.StringType()),
    T.StructField("dead_letter_error_description", T.StringType()),
    T.StructField("dead_letter_source", T.StringType()),
    T.StructField("_picked", T.BooleanType()), T.StructField("_passed", T.BooleanType()),
    T.StructField("_void", T.BooleanType()),
    T.StructField("_new_token", T.StringType()), T.StructField("_token", T.StringType()),
    T.StructField("_record_at", T.TimestampType()),
])


def _row(**kw: Any) -> dict[str, Any]:
    base = {"origin": "ledger", "lane": Lane.MAIN, "state": "Active", "delivery_count": 1,
            "lock_token": None, "locked_until_utc": None, "expires_at_utc": None,
            "scheduled_enqueue_time_utc": None, "row_version": 4, "dead_letter_reason": None,
            "dead_letter_error_description": None, "dead_letter_source": None,
            "_picked": False, "_passed": False, "_void": False, "_new_token": "new", "_token": None,
            "_record_at": None}
    return {**base, **kw}


ROWS = [
    _row(_picked=True),
    _row(origin="inbox", _picked=True, _passed=True, delivery_count=0, row_version=None),
    _row(origin="inbox", _passed=True, delivery_count=0, row_version=None,
         expires_at_utc=NOW - timedelta(seconds=1)),
    _row(lock_token="t", locked_until_utc=NOW - timedelta(seconds=1), delivery_count=3),
    _row(lock_token="t", locked_until_utc=NOW + timedelta(seconds=9), _token="t"),
    _row(lock_token="t", locked_until_utc=NOW + timedelta(seconds=9), _token="other"),
    _row(lock_token="t", locked_until_utc=None, _token=None, delivery_count=None),
    # completion records (decision 011): written in time, too late, lock since expired
    _row(lock_token="t", locked_until_utc=NOW + timedelta(seconds=9), _record_at=NOW),
    _row(lock_token="t", locked_until_utc=NOW - timedelta(seconds=9), _record_at=NOW),
    _row(lock_token="t", locked_until_utc=NOW - timedelta(seconds=1), delivery_count=3,
         _record_at=NOW - timedelta(seconds=2)),
]


def _both(spark: Any, outcome: dict[str, Any]) -> None:
    df = spark.createDataFrame([tuple(r[f.name] for f in SCHEMA) for r in ROWS], SCHEMA)
    types = {f.name: f.dataType for f in SCHEMA}
    got = [r.asDict() for r in project(df, outcome, types).collect()]
    for as_read, spark_row in zip(ROWS, got, strict=True):
        for name, expr in outcome.items():
            expected = expr.evaluate(as_read)
            value = spark_row[name]
            if isinstance(value, datetime) and isinstance(expected, datetime):
                expected = expected.astimezone(timezone.utc).replace(tzinfo=None)
            assert value == expected, (name, as_read, value, expected)


@pytest.mark.parametrize("peek_lock", [True, False])
@pytest.mark.parametrize("dead_letter", [True, False])
def test_receive_outcome_is_the_same_in_python_and_in_spark(spark: Any, peek_lock: bool,
                                                            dead_letter: bool) -> None:
    ctx = ReceiveContext(now=NOW, locked_until=NOW + timedelta(seconds=65),
                         peek_lock=peek_lock, max_delivery_count=3,
                         dead_letter_on_expiry=dead_letter, main_queue=True)
    _both(spark, receive_outcome(ctx))
    _both(spark, {"_ok": deliverable(ctx)})


@pytest.mark.parametrize("kind", ["complete", "abandon", "defer", "dead_letter", "renew"])
def test_settle_outcome_is_the_same_in_python_and_in_spark(spark: Any, kind: str) -> None:
    ctx = SettleContext(now=NOW, kind=kind, max_delivery_count=3,
                        renewed_until=NOW + timedelta(seconds=60),
                        reason="it's \\ 'odd'\n\u00e9", description=None)
    _both(spark, settle_outcome(ctx))
    _both(spark, {"_valid": settle_valid(NOW)})


def test_text_that_sql_would_read_differently_arrives_unchanged(spark: Any) -> None:
    from sbqueue.core.expr import lit

    for text in ["plain", "it's", "back\\slash", "new\nline", "\u00e9t\u00e9", "' OR 1=1 --"]:
        assert spark.range(1).select(to_column(lit(text)).alias("v")).first()["v"] == text
    assert "OR" not in to_sql(lit("' OR 1=1 --"))  # encoded, never spliced into the SQL
