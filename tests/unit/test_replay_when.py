"""``sbqueue replay --as-of``: a version or an ISO-8601 time, anything else refused with the
value (issue 22 point 4)."""

from __future__ import annotations

from datetime import datetime, timezone

import click
import pytest

from sbqueue.cli_replay import _when


def test_digits_are_a_version_and_a_time_is_utc_unless_it_says() -> None:
    assert _when("12") == 12
    assert _when("2026-11-27T08:00:00") == datetime(2026, 11, 27, 8, tzinfo=timezone.utc)
    assert _when("2026-11-27T09:00:00+01:00").astimezone(timezone.utc).hour == 8  # type: ignore[union-attr]


@pytest.mark.parametrize("text", ["yesterday", "-1", "1.5", ""])
def test_anything_else_is_refused_naming_it(text: str) -> None:
    with pytest.raises(click.BadParameter, match=repr(text)):
        _when(text)
