"""Auto-forwarding rules (SPEC S13), as pure functions the engine applies to DataFrames.

A forwarding step claims messages into the source's ``transfer`` lane under one batch
token, writes them to the destination, then releases the batch: each row is deleted
(forwarded) or moved to the transfer dead-letter queue with a reason (S13.3). The token
says which sub-queue the batch came from, so a step that resumes someone else's batch
knows its destination from the rows alone (decision 010).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sbqueue.core.expr import Expr, coalesce, col, lit, when
from sbqueue.core.transitions import ACTIVE, DEFERRED, Lane, Outcome, ReceiveContext, deliverable

__all__ = [
    "DISABLED_REASON",
    "HOP_REASON",
    "MAX_HOPS",
    "MISSING_REASON",
    "Source",
    "batch_token",
    "carried_sequence",
    "claim_outcome",
    "claim_valid",
    "destination_of",
    "next_hop",
    "release_outcome",
    "release_valid",
    "source_of",
    "transfer_reason",
    "window_forwardable",
]

MAX_HOPS = 4  # a message about to make its 5th hop is transfer-dead-lettered (S13.3)
HOP_REASON = "MaxTransferHopCountExceeded"
MISSING_REASON = "MessagingEntityNotFound"
DISABLED_REASON = "MessagingEntityDisabled"
FORWARD_SEND_PREFIX = "fwd-"  # the send id (and Delta txnAppId) of a batch's destination write


class Source:
    """Which sub-queue of the source a batch was claimed from: its messages go to
    ``forward_to`` (main) or ``forward_dead_lettered_messages_to`` (dead-letter), or
    dead-lettered messages resubmitted to the destination named in the token."""

    MAIN = "m"
    DEAD_LETTER = "d"
    RESUBMIT = "r"


_SOURCES = (Source.MAIN, Source.DEAD_LETTER, Source.RESUBMIT)
_ID = 32  # hex digits of the token's random part


def batch_token(source: str, destination: str | None = None) -> str:
    """A fresh batch token: the sub-queue it came from, a random part, and for a
    resubmission its destination (so that a resumed batch knows where it goes)."""
    if source not in _SOURCES:
        raise ValueError(f"unknown forwarding source {source!r}")
    if (source == Source.RESUBMIT) != bool(destination):
        raise ValueError("a resubmission, and only one, names its destination")
    return f"{source}{uuid.uuid4().hex}{destination or ''}"


def source_of(token: str) -> str:
    """The sub-queue a batch token was drawn for."""
    if len(token) < 1 + _ID or token[0] not in _SOURCES:
        raise ValueError(f"{token!r} is not a forwarding batch token")
    return token[0]


def destination_of(token: str) -> str | None:
    """The destination a resubmission's token names (None for forwarding)."""
    if source_of(token) != Source.RESUBMIT:
        return None
    return token[1 + _ID:] or None


def transfer_reason(hop_count: int | None, destination_missing: bool,
                    destination_disabled: bool) -> str | None:
    """Why a claimed message cannot be forwarded (S13.3), or None: it goes on. A missing
    destination wins over a disabled one, which wins over the hop limit."""
    if destination_missing:
        return MISSING_REASON
    if destination_disabled:
        return DISABLED_REASON
    if (hop_count or 0) >= MAX_HOPS:
        return HOP_REASON
    return None


def next_hop(hop_count: int | None) -> int:
    """The hop count a forwarded message carries at its destination."""
    return (hop_count or 0) + 1


def carried_sequence(enqueued_sequence_number: int | None, sequence_number: int) -> int:
    """S3.3: ``enqueued_sequence_number`` keeps the number from the first entity."""
    return enqueued_sequence_number or sequence_number


def window_forwardable(ctx: ReceiveContext) -> Expr:
    """An inbox row a forwarding window may take as it stands (decision 017): a message a
    receive would hand out now (``deliverable`` on a row never delivered: due, not
    expired) that can make one more hop. A window ends before the first row that is not,
    and the receive path decides that one (schedules it, retires it, transfer-dead-letters
    it)."""
    return deliverable(ctx) & (coalesce(col("hop_count"), lit(0)) < MAX_HOPS)


def claim_valid(now: datetime) -> Expr:
    """A dead-lettered message a resubmission may claim: not locked, not deferred."""
    return ((col("locked_until_utc").is_null() | (col("locked_until_utc") <= now))
            & (col("state") != DEFERRED))


def claim_outcome(token: str, lease_until: datetime) -> Outcome:
    """Claiming a message for a batch: into the transfer lane under the batch's token."""
    return {"_op": lit("upsert"), "lane": lit(Lane.TRANSFER), "lock_token": lit(token),
            "locked_until_utc": lit(lease_until), "row_version": col("row_version") + 1}


def release_valid() -> Expr:
    """A row of the batch: its token is the batch's (a lease that ran out does not matter
    any more, the destination write is done)."""
    return (col("lane") == Lane.TRANSFER) & (col("lock_token") == col("_token"))


def release_outcome() -> Outcome:
    """What releasing a batch does to each row (``_reason`` from ``transfer_reason``):
    forwarded rows leave the source; the others go to its transfer dead-letter queue."""
    failed = col("_reason").is_not_null()
    return {
        "_op": when(failed, "upsert").otherwise(lit("delete")),
        "lane": lit(Lane.TRANSFER_DEAD_LETTER),
        "state": lit(ACTIVE),
        "lock_token": lit(None),
        "locked_until_utc": lit(None),
        "row_version": col("row_version") + 1,
        "dead_letter_reason": col("_reason"),
        "dead_letter_error_description": col("_description"),
    }
