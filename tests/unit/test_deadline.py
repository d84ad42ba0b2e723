"""``timeout=`` (issue 20 point 3): the deadline checked before each commit
(``sbqueue.store.deadline``), per thread, refused when not a positive number."""

from __future__ import annotations

import threading
import time

import pytest

from sbqueue.exceptions import OperationTimeoutError
from sbqueue.store import deadline


def test_past_the_deadline_a_commit_is_refused() -> None:
    with deadline.within(0.01, "send_messages"):
        deadline.check()  # in time
        time.sleep(0.02)
        with pytest.raises(OperationTimeoutError, match=r"send_messages.*0.01 s"):
            deadline.check()
    deadline.check()  # no deadline outside


def test_no_timeout_no_limit_and_bad_values_refused() -> None:
    with deadline.within(None, "x"):
        deadline.check()
    for bad in (0, -1, "5", True):
        with pytest.raises(ValueError, match="timeout"), deadline.within(bad, "x"):
            pass


def test_a_deadline_belongs_to_its_thread() -> None:
    seen: list[bool] = []

    def other() -> None:
        try:
            deadline.check()
            seen.append(True)
        except OperationTimeoutError:
            seen.append(False)

    with deadline.within(1e-9, "x"):
        time.sleep(0.001)
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == [True]
