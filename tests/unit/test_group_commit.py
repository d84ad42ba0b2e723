"""Decision 011: group commit (``engine.group``). Callers that arrive while a commit runs
are carried together by the next one, each gets its own result, a failed commit fails each
of its callers, and a caller alone leads at once."""

from __future__ import annotations

import threading
import time

import pytest

from sbqueue.engine.group import Group


def test_callers_waiting_during_a_commit_share_the_next_one() -> None:
    started, release = threading.Event(), threading.Event()
    runs: list[list[int]] = []

    def run(batch: list[int]) -> list[int]:
        runs.append(list(batch))
        if len(runs) == 1:
            started.set()
            release.wait(5)
        return [x * 10 for x in batch]

    group: Group[int, int] = Group(run, capacity=100)
    results: dict[int, int] = {}
    first = threading.Thread(target=lambda: results.update({0: group.submit(0)}))
    first.start()
    assert started.wait(5)
    others = [threading.Thread(target=lambda i=i: results.update({i: group.submit(i)}))
              for i in range(1, 6)]
    for t in others:
        t.start()
    deadline = time.monotonic() + 5
    while len(group._waiting) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for t in [first, *others]:
        t.join(5)
    assert results == {i: i * 10 for i in range(6)}
    assert runs[0] == [0] and sorted(runs[1]) == [1, 2, 3, 4, 5] and len(runs) == 2
    assert group.commits == 2


def test_capacity_splits_the_waiting_callers_and_weights_count() -> None:
    gate = threading.Event()
    runs: list[list[int]] = []

    def run(batch: list[int]) -> list[int]:
        runs.append(list(batch))
        gate.wait(5)
        return batch

    group: Group[int, int] = Group(run, capacity=3)
    threads = [threading.Thread(target=group.submit, args=(i,), kwargs={"weight": 2})
               for i in range(4)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    gate.set()
    for t in threads:
        t.join(5)
    assert all(len(batch) == 1 for batch in runs) and len(runs) == 4  # 2 + 2 > 3


def test_a_failed_commit_fails_each_of_its_callers_and_the_next_one_runs() -> None:
    calls = []

    def run(batch: list[int]) -> list[int]:
        calls.append(batch)
        if len(calls) == 1:
            raise OSError("storage down")
        return batch

    group: Group[int, int] = Group(run, capacity=10)
    with pytest.raises(OSError, match="storage down"):
        group.submit(1)
    assert group.submit(2) == 2
