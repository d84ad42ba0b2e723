"""Issue 19 point 3: the engine reads time from one clock that tests move instead of sleeping."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sbqueue.core import clock


def test_advance_moves_now_forward_and_reset_puts_it_back() -> None:
    try:
        wall = datetime.now(timezone.utc)
        moved = clock.advance(timedelta(minutes=5))
        assert moved - wall >= timedelta(minutes=5)
        assert clock.advance(1.5) - moved >= timedelta(seconds=1.5)  # seconds as a float
        assert clock.offset() == timedelta(minutes=5, seconds=1.5)
    finally:
        clock.reset()
    assert clock.offset() == timedelta(0)
    assert abs(clock.utcnow() - datetime.now(timezone.utc)) < timedelta(seconds=1)


def test_the_clock_never_runs_backwards() -> None:
    with pytest.raises(ValueError, match="only moves forward"):
        clock.advance(-1)
    assert clock.offset() == timedelta(0)


def test_engine_time_comes_from_the_clock_alone() -> None:
    """No module of the engine reads the wall clock or Spark's current_timestamp itself,
    except ``engine.columns.now_column``: the clock's now inside a query."""
    from pathlib import Path

    import sbqueue

    root = Path(sbqueue.__file__).parent
    readers = [str(p.relative_to(root)) for p in root.rglob("*.py")
               if p.name not in ("clock.py", "columns.py") and any(
                   s in p.read_text() for s in ("datetime.now(", "current_timestamp()\n",
                                                "F.current_timestamp", "utcnow() ->"))]
    assert readers == []
