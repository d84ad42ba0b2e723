"""Session rules as pure functions (S10.2, S10.3, S10.5), no Spark."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sbqueue.core.sessions import check_session_id, lockable, session_held, state_bytes
from sbqueue.exceptions import InvalidOperationError, MessageSizeExceededError

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(("locked_until", "free"), [
    (None, True), (NOW - timedelta(seconds=1), True), (NOW, True),
    (NOW + timedelta(seconds=1), False)])
def test_s10_3_a_session_is_lockable_once_its_lock_ended(locked_until, free) -> None:
    assert lockable(NOW).evaluate({"locked_until_utc": locked_until}) is free


@pytest.mark.parametrize(("token", "locked_until", "held"), [
    ("t", NOW + timedelta(seconds=5), True),
    ("other", NOW + timedelta(seconds=5), False),  # taken over by another receiver
    ("t", NOW, False),  # ended
    (None, None, False)])  # released
def test_s10_3_held_means_own_token_and_lock_not_ended(token, locked_until, held) -> None:
    row = {"lock_token": token, "locked_until_utc": locked_until}
    assert bool(session_held("t", NOW).evaluate(row)) is held


def test_s10_5_state_is_bytes_str_or_none_within_one_message_size() -> None:
    assert state_bytes(None, 10) is None
    assert state_bytes("hé", 10) == "hé".encode()
    assert state_bytes(bytearray(b"ab"), 10) == b"ab"
    with pytest.raises(MessageSizeExceededError, match=r"11 bytes.*S10.5"):
        state_bytes(b"x" * 11, 10)
    with pytest.raises(InvalidOperationError, match=r"int.*S10.5"):
        state_bytes(5, 10)


def test_s10_2_session_ids_are_non_empty_strings_of_at_most_128() -> None:
    assert check_session_id("a" * 128) == "a" * 128
    for bad in ("", None, 7):
        with pytest.raises(InvalidOperationError, match=r"S10.2"):
            check_session_id(bad)
    with pytest.raises(InvalidOperationError, match=r"129 characters"):
        check_session_id("a" * 129)
