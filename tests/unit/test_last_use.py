"""S16.3: an entity's last use is its newest commit that maintenance did not make
(``engine.maintain.job.last_use``), over tables that answer ``recent_commits`` as the store
does: newest first, (version, time, operation, user metadata). No Spark."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from sbqueue.engine.maintain.job import MARK, last_use

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


class Log:
    """A table's commits, oldest first as given; answered newest first."""

    def __init__(self, commits: list[tuple[str, str | None]]) -> None:
        self.commits = [(v, T0 + timedelta(minutes=v), op, meta)
                        for v, (op, meta) in enumerate(commits)]
        self.asked: list[int | None] = []

    def recent_commits(self, limit: int | None = None) -> list[Any]:
        self.asked.append(limit)
        newest = self.commits[::-1]
        return newest if limit is None else newest[:limit]


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_the_newest_commit_not_maintenances_is_the_use() -> None:
    log = Log([("CREATE TABLE", None), ("WRITE", "send"), ("WRITE", MARK), ("OPTIMIZE", None)])
    assert last_use([log]) == _at(1)  # type: ignore[list-item]
    assert log.asked == [200]


def test_a_use_older_than_200_maintenance_commits_is_still_found() -> None:
    log = Log([("CREATE TABLE", None), ("WRITE", "send")] + [("WRITE", MARK)] * 250)
    assert last_use([log]) == _at(1)  # type: ignore[list-item]
    assert log.asked == [200, None]


def test_a_log_of_only_maintenance_commits_gives_its_oldest() -> None:
    log = Log([("VACUUM START", None), ("VACUUM END", None), ("WRITE", MARK)])
    assert last_use([log]) == _at(0)  # type: ignore[list-item]


def test_the_newest_use_across_tables_and_none_without_commits() -> None:
    ledger = Log([("CREATE TABLE", None), ("WRITE", MARK), ("MERGE", None)])
    inbox = Log([("CREATE TABLE", None), ("WRITE", None)])
    assert last_use([ledger, inbox]) == _at(2)  # type: ignore[list-item]
    assert last_use([Log([])]) is None  # type: ignore[list-item]
