"""Session rules as pure functions (SPEC S10): who may lock a session, what its state is.

A session has one ``s`` row in its partition's ledger (lane ``session``): the holder's lock
token, the lock's end, and the session state. The engine applies these expressions to that
row; tests evaluate the same expressions on plain dicts.
"""

from __future__ import annotations

from datetime import datetime

from sbqueue.core.expr import Expr, col, lit
from sbqueue.core.sizes import MAX_ID_LENGTH, is_utf8
from sbqueue.exceptions import InvalidOperationError, MessageSizeExceededError

__all__ = [
    "check_session_id",
    "lockable",
    "session_held",
    "state_bytes",
]

def lockable(now: datetime) -> Expr:
    """A session no receiver holds: never locked, released, or its lock expired (S10.3)."""
    return col("locked_until_utc").is_null() | (col("locked_until_utc") <= now)


def session_held(token: str, now: datetime) -> Expr:
    """The caller still holds the session: its token, and the lock has not ended (S10.3)."""
    return (col("lock_token") == lit(token)) & (col("locked_until_utc") > now)


def check_session_id(session_id: object) -> str:
    """A session id a receiver can ask for (S2.2, S10.2): one a message can carry."""
    if not isinstance(session_id, str) or not session_id or not is_utf8(session_id):
        raise InvalidOperationError(
            f"session_id {session_id!r:.80} is not a non-empty string UTF-8 can store (S10.2)")
    if len(session_id) > MAX_ID_LENGTH:
        raise InvalidOperationError(
            f"session_id {session_id[:40]!r}... of {len(session_id)} characters; at most "
            f"{MAX_ID_LENGTH} (S2.2)")
    return session_id


def state_bytes(state: object, max_bytes: int) -> bytes | None:
    """The stored form of a session state: bytes, a str as UTF-8, or None (S10.5); at most
    one message size."""
    if state is None:
        return None
    if isinstance(state, str):
        if not is_utf8(state):  # a lone surrogate: a raw UnicodeEncodeError otherwise
            raise InvalidOperationError(
                f"session state {state[:40]!r} holds a lone surrogate; UTF-8 cannot store it "
                "(S10.5)")
        data = state.encode("utf-8")
    elif isinstance(state, (bytes, bytearray, memoryview)):
        data = bytes(state)
    else:
        raise InvalidOperationError(
            f"session state of type {type(state).__name__} is not bytes, str or None (S10.5)")
    if len(data) > max_bytes:
        raise MessageSizeExceededError(
            f"session state of {len(data)} bytes is larger than the entity's message size "
            f"of {max_bytes} bytes (S10.5)")
    return data
