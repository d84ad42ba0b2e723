"""The ledger rows a receive decided on the driver reads (``engine.receive.small``): one
read of the partitions it asked, filtered by ``slice_rule`` (one home with the Spark
path's ``ledger_slice``), with range locks run out, and of the message rows those not
locked. The filter is compiled once per lane and cancel (``core.expr.Template``) and its
time filled per receive: built and compiled per call it cost more than the rows it read.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from pyspark.sql import functions as F

from sbqueue.core.expr import Expr, Template, col, lit
from sbqueue.core.transitions import Lane
from sbqueue.engine.columns import to_column
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.receive.attempt import (
    SLICE_COLUMNS,
    Attempt,
    as_aware,
    slice_lanes,
    slice_rule_at,
)
from sbqueue.engine.schema import WINDOW
from sbqueue.store.driver import Pinned
from sbqueue.store.thresholds import MARKS_READ

__all__ = ["ledger_rows", "read_rule"]


def ledger_rows(ledger: Ledger, a: Attempt, lane: str, limit: int,
                pinned: Pinned | None = None) -> list[dict[str, Any]] | None:
    """The ledger rows a small receive decides on (``slice_rule``), in one read: the
    cursors, commit markers and completion records first, then the first ``limit`` message
    rows not locked, by sequence number. None when there are more of either than it reads.
    Locked rows are not read: they cannot change, except by a record, which folds them
    without a read (``engine.receive.small._folds``). Read on the driver where the ledger
    is local (no Spark job), else one top-k job. Range locks run out are read too: one
    read, not two."""
    keep = _template(lane, a.cancel).fill(now=a.ctx.now)["keep"]
    cap = MARKS_READ + limit + 1
    where = {"partition_id": a.partitions, "lane": slice_lanes(lane)}
    here = (pinned.rows(where, SLICE_COLUMNS, lambda row: keep(row) is True)
            if pinned is not None else
            ledger.scan_here(where, SLICE_COLUMNS, lambda row: keep(row) is True))
    if here is not None:
        out = sorted(here, key=lambda r: (r["row_type"] == "m", r["sequence_number"]))[:cap]
    else:
        out = [as_aware(r) for r in ledger.rows(F.col("partition_id").isin(a.partitions))
               .where(to_column(read_rule(a.ctx.now, lane, a.cancel))).select(*SLICE_COLUMNS)
               .orderBy(F.col("row_type") == "m", "sequence_number").limit(cap).collect()]
    messages = sum(1 for r in out if r["row_type"] == "m")
    return None if len(out) == cap or messages > limit else out


def read_rule(now: datetime, lane: str, cancel: tuple[int, ...]) -> Expr:
    """The rows ``ledger_rows`` reads: ``slice_rule``'s, with range locks run out, and of
    the message rows those not locked."""
    lapsed = ((col("row_type") == WINDOW) & (col("lane") == Lane.MAIN)
              & (col("locked_until_utc") <= lit(now)) & lit(lane == Lane.MAIN))
    return (slice_rule_at(now, lane, cancel) | lapsed) & (
        (col("row_type") != "m") | col("locked_until_utc").is_null()
        | (col("locked_until_utc") <= lit(now)))


_NOW = datetime(1970, 1, 1, tzinfo=timezone.utc)  # stands for a receive's time in templates


@lru_cache(maxsize=64)
def _template(lane: str, cancel: tuple[int, ...]) -> Template:
    """``read_rule`` compiled once per lane and cancel, its time filled per receive."""
    return Template({"keep": read_rule(_NOW, lane, cancel)}, {"now": _NOW})
