"""Lock tokens (``core.tokens``, S5.2, decision 018): a range lock's token is told apart
from any other by itself, so a settlement looks for ranges only where one may be."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from sbqueue.core.tokens import is_range_token, range_token


def test_a_range_token_is_a_uuid_of_its_own_version() -> None:
    tokens = {range_token() for _ in range(200)}
    assert len(tokens) == 200
    for token in tokens:
        parsed = uuid.UUID(token)
        assert str(parsed) == token and parsed.variant == uuid.RFC_4122
        assert is_range_token(token)


def test_a_message_lock_token_is_no_range_token() -> None:
    assert not any(is_range_token(str(uuid.uuid4())) for _ in range(200))


@given(st.one_of(st.none(), st.text(max_size=40)))
def test_anything_else_is_no_range_token(text: str | None) -> None:
    assert not is_range_token(text) or uuid.UUID(str(text)).version == 8
