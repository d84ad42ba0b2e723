"""``store.logfiles.first_commit_since``: the walk back over a Delta log's commit times
that bounds a driver-side duplicate check (S11.2). Pure: a log folder of JSON lines."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sbqueue.store.logfiles import commit_name, first_commit_since
from sbqueue.store.objects import LocalFiles

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)


def _log(tmp_path: Path, minutes: list[int | None]) -> LocalFiles:
    """Commits 0.. made ``minutes`` after T0 (None: a commit info without a time)."""
    log = tmp_path / "_delta_log"
    log.mkdir()
    for version, m in enumerate(minutes):
        info = {} if m is None else {"timestamp": int((T0 + timedelta(minutes=m))
                                                      .timestamp() * 1000)}
        (log / commit_name(version)).write_text(json.dumps({"commitInfo": info}) + "\n")
    return LocalFiles(log)


def test_the_walk_stops_at_the_first_commit_older_than_the_time(tmp_path: Path) -> None:
    log = _log(tmp_path, [0, 1, 2, 5, 6, 9])
    assert first_commit_since(log, T0 + timedelta(minutes=3), 5, 100) == 3
    assert first_commit_since(log, T0 + timedelta(minutes=5), 5, 100) == 3  # at: kept
    assert first_commit_since(log, T0 + timedelta(minutes=10), 5, 100) == 6  # none since
    assert first_commit_since(log, T0 - timedelta(minutes=1), 5, 100) == 0  # all of them


def test_the_walk_gives_up_past_its_depth_or_at_what_it_cannot_read(
        tmp_path: Path) -> None:
    log = _log(tmp_path, [0, 1, None, 5, 6, 9])
    assert first_commit_since(log, T0, 5, 2) is None  # deeper than two commits
    assert first_commit_since(log, T0, 5, 100) is None  # commit 2 has no time
    assert first_commit_since(log, T0, 7, 100) is None  # commit 7 is not there
