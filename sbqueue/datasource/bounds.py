"""Which filters of ``spark.read.format("sbqueue")`` the source applies itself.

Filters on ``partition_id`` and ``sequence_number`` (whose top bits are the partition,
S3.1) choose the partitions read: the others are never opened. Those and filters on
``enqueued_time_utc`` are then applied exactly to each row read, so Spark need not
apply them again. Everything else is handed back to Spark. Pure logic, no Spark.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from sbqueue.core.sequence import sequence_of

__all__ = ["Bounds"]

_COMPARE: dict[type[Filter], Callable[[Any, Any], bool]] = {
    EqualTo: operator.eq, GreaterThan: operator.gt, GreaterThanOrEqual: operator.ge,
    LessThan: operator.lt, LessThanOrEqual: operator.le}
_COLUMNS = ("partition_id", "sequence_number", "enqueued_time_utc")
Check = Callable[[Any], bool]


def _aware(value: Any) -> Any:
    """A filter's timestamp as the rows carry it: aware UTC (a naive one taken as local,
    as PySpark converts timestamps)."""
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc)
    return value


def _check(kind: type[Filter], value: Any) -> Check:
    if kind is In:
        allowed = frozenset(_aware(v) for v in value)
        return lambda x: x in allowed
    compare, bound = _COMPARE[kind], _aware(value)
    return lambda x: x is not None and compare(x, bound)


@dataclass
class Bounds:
    """The filters taken: (filter class, value) per column."""

    taken: dict[str, list[tuple[type[Filter], Any]]] = field(default_factory=dict)

    def take(self, f: Filter) -> bool:
        """Whether this source applies ``f`` (then Spark does not)."""
        column: tuple[str, ...] = getattr(f, "attribute", ())
        if type(f) not in (*_COMPARE, In) or len(column) != 1 or column[0] not in _COLUMNS:
            return False
        self.taken.setdefault(column[0], []).append((type(f), f.value))  # type: ignore[attr-defined]
        return True

    def keep(self, filters: Iterable[Filter]) -> list[Filter]:
        """The filters left for Spark."""
        return [f for f in filters if not self.take(f)]

    def partitions(self, count: int) -> list[int]:
        """The partitions a row passing every filter taken can be in."""
        parts = _Interval.of(self.taken.get("partition_id", []))
        numbers = _Interval.of(self.taken.get("sequence_number", []))
        return [p for p in range(count) if parts.meets(p, p)
                and numbers.meets(sequence_of(p, 0), sequence_of(p + 1, 0) - 1)]

    def row_test(self) -> Callable[[dict[str, Any]], bool]:
        """Whether a row passes every filter taken."""
        checks = [(name, _check(kind, value)) for name, taken in self.taken.items()
                  for kind, value in taken]
        return lambda row: all(check(row[name]) for name, check in checks)


@dataclass(frozen=True)
class _Interval:
    """The integers integer filters allow: ``low..high``, and only ``values`` if given."""

    low: float
    high: float
    values: frozenset[int] | None

    @classmethod
    def of(cls, taken: list[tuple[type[Filter], Any]]) -> _Interval:
        low, high, values = -math.inf, math.inf, None
        for kind, value in taken:
            if kind in (EqualTo, In):
                given = frozenset(v for v in (value if kind is In else [value])
                                  if v is not None)  # NULL matches nothing
                values = given if values is None else values & given
            elif kind in (GreaterThan, GreaterThanOrEqual):
                low = max(low, value + (kind is GreaterThan))
            else:
                high = min(high, value - (kind is LessThan))
        return cls(low, high, values)

    def meets(self, first: int, last: int) -> bool:
        """Whether some allowed integer lies in ``first..last``."""
        low, high = max(self.low, first), min(self.high, last)
        if low > high:
            return False
        return self.values is None or any(low <= v <= high for v in self.values)
