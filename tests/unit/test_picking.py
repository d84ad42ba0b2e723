"""Decision 011 step 2b: the picking of a receive decided on the driver (``core.picking``),
on plain rows (S5.4 a receive returns at most what was asked, S5.5 returned messages
first, S12.2 nothing at or after a transaction still committing)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sbqueue.core.picking import pick
from sbqueue.core.transitions import Lane, ReceiveContext, deliverable

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
CTX = ReceiveContext(now=NOW, locked_until=NOW + timedelta(seconds=60), peek_lock=True,
                     max_delivery_count=10, dead_letter_on_expiry=False, main_queue=True)


def message(partition: int, counter: int, origin: str = "inbox", **kw: object) -> dict:
    row = {"partition_id": partition, "sequence_number": (partition << 48) + counter,
           "origin": origin, "lane": Lane.MAIN if origin == "ledger" else None,
           "state": "Active", "delivery_count": 0, "lock_token": None,
           "locked_until_utc": None, "expires_at_utc": None, "scheduled_enqueue_time_utc": None,
           "_record_at": None, "_pending": False, "_void": False}
    row.update(kw)
    return row


def picked(rows: list[dict]) -> list[int]:
    return [r["sequence_number"] & 0xFFFF for r in rows if r["_picked"]]


def test_s5_5_a_returned_message_comes_before_the_inbox_head() -> None:
    rows = [message(0, 5), message(0, 6), message(0, 2, "ledger")]
    pick(rows, deliverable(CTX), share=1, total=1, asked=1, rotation=0)
    assert picked(rows) == [2]
    cursor = [r for r in rows if r["_cursor_to"]]
    assert cursor == []  # nothing of the inbox handed out, and its first row could be


def test_s5_4_at_most_total_over_partitions_and_the_cursor_passes_what_was_taken() -> None:
    rows = [message(p, c) for p in (0, 1, 2) for c in (1, 2, 3)]
    pick(rows, deliverable(CTX), share=2, total=3, asked=3, rotation=1)
    assert len(picked(rows)) == 3
    for p in (0, 1, 2):
        taken = [r for r in rows if r["partition_id"] == p and r["_picked"]]
        passed = [r for r in rows if r["partition_id"] == p and r["_passed"]]
        assert passed == sorted(taken, key=lambda r: r["sequence_number"])
        assert sum(r["_cursor_to"] for r in rows if r["partition_id"] == p) == (1 if taken else 0)
        assert all(r["_left"] == 3 - len(taken) for r in rows if r["partition_id"] == p)


def test_expired_heads_are_passed_up_to_the_first_deliverable_row() -> None:
    gone = NOW - timedelta(seconds=1)
    rows = [message(0, 1, expires_at_utc=gone), message(0, 2, expires_at_utc=gone),
            message(0, 3), message(0, 4)]
    pick(rows, deliverable(CTX), share=1, total=1, asked=1, rotation=0)
    assert picked(rows) == [3]
    assert [r["sequence_number"] & 0xFFFF for r in rows if r["_passed"]] == [1, 2, 3]
    assert [r["sequence_number"] & 0xFFFF for r in rows if r["_cursor_to"]] == [3]


def test_s12_2_nothing_at_or_after_a_pending_transaction() -> None:
    rows = [message(0, 1, _pending=True), message(0, 2), message(1, 1, _void=True),
            message(1, 2)]
    pick(rows, deliverable(CTX), share=5, total=5, asked=2, rotation=0)
    assert picked(rows) == [2]  # partition 1's second row; partition 0 waits
    assert not any(r["_passed"] for r in rows if r["partition_id"] == 0)
    assert [r["_passed"] for r in rows if r["partition_id"] == 1] == [True, True]


def test_none_deliverable_passes_every_row_seen_and_pass_to_moves_further() -> None:
    locked = NOW + timedelta(seconds=30)
    rows = [message(0, 1, "ledger", lock_token="t", locked_until_utc=locked), message(0, 2,
            scheduled_enqueue_time_utc=NOW + timedelta(hours=1))]
    pick(rows, deliverable(CTX), share=1, total=1, asked=1, rotation=0)
    assert picked(rows) == []
    assert [r["_passed"] for r in rows] == [False, True]
    rows = [message(0, 1), message(0, 2)]
    pick(rows, deliverable(CTX), share=0, total=0, asked=1, rotation=0, pass_to={0: 2 + 0})
    assert picked(rows) == []
    assert [r["_passed"] for r in rows] == [True, True]  # passed to 2 (counter 2 here)
