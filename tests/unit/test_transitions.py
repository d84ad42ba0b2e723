"""Issue 5 point 3: every state change is a pure function of the row as read, tested on
plain rows (S5.2, S5.3, S6.1-S6.7, S7.2, S8.2, S8.4)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sbqueue.core.expr import coalesce, col, greatest, lit, when
from sbqueue.core.transitions import (
    Lane,
    ReceiveContext,
    SettleContext,
    cancel_outcome,
    cancel_valid,
    deferred_expired,
    deferred_outcome,
    deferred_valid,
    deliverable,
    expiry_outcome,
    receive_outcome,
    settle_outcome,
    settle_valid,
)

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
LOCK = NOW + timedelta(seconds=65)


def ctx(**kw) -> ReceiveContext:
    base = {"now": NOW, "locked_until": LOCK, "peek_lock": True, "max_delivery_count": 3,
            "dead_letter_on_expiry": False, "main_queue": True}
    return ReceiveContext(**{**base, **kw})


def row(**kw) -> dict:
    base = {"origin": "ledger", "lane": Lane.MAIN, "state": "Active", "delivery_count": 1,
            "lock_token": None, "locked_until_utc": None, "expires_at_utc": None,
            "scheduled_enqueue_time_utc": None, "row_version": 4, "dead_letter_reason": None,
            "dead_letter_error_description": None, "_picked": False, "_passed": False,
            "_void": False, "_new_token": "new", "_token": None, "_record_at": None}
    return {**base, **kw}


def apply(outcome: dict, r: dict) -> dict:
    """Every output column from the row as read: order of evaluation cannot matter."""
    return {name: expr.evaluate(r) for name, expr in outcome.items()}


def test_expressions_follow_sql_null_rules() -> None:
    r = {"a": None, "b": 2}
    assert (col("a") == 1).evaluate(r) is None
    assert (col("a") > 1).evaluate(r) is None
    assert ((col("a") == 1) & lit(False)).evaluate(r) is False
    assert ((col("a") == 1) | lit(True)).evaluate(r) is True
    assert ((col("a") == 1) | lit(False)).evaluate(r) is None
    assert when(col("a") == 1, "x").otherwise("y").evaluate(r) == "y"  # NULL is not true
    assert coalesce(col("a"), col("b")).evaluate(r) == 2
    assert greatest(col("a"), col("b"), lit(1)).evaluate(r) == 2
    assert (col("b") + 1).evaluate(r) == 3 and (col("a") + 1).evaluate(r) is None


def test_s5_2_s5_3_a_picked_row_is_locked_once_with_the_stamped_time() -> None:
    out = apply(receive_outcome(ctx()), row(_picked=True, delivery_count=1))
    assert out["_op"] == "upsert" and out["_handed"] is True
    assert out["lock_token"] == "new" and out["locked_until_utc"] == LOCK
    assert out["delivery_count"] == 2 and out["row_version"] == 5
    assert out["lane"] == Lane.MAIN and out["dead_letter_reason"] is None


def test_s5_1_receive_and_delete_removes_ledger_rows_and_writes_nothing_for_inbox_rows() -> None:
    c = ctx(peek_lock=False)
    assert apply(receive_outcome(c), row(_picked=True))["_op"] == "delete"
    fresh = apply(receive_outcome(c), row(origin="inbox", lane=None, delivery_count=0,
                                          _picked=True, _passed=True))
    assert fresh["_op"] is None and fresh["_handed"] is True


def test_s6_7_an_expired_lock_after_the_last_delivery_dead_letters_and_unlocks() -> None:
    """The max-th delivery's lock expired: the row goes to the DLQ, without its lock, with
    the reason; it is not handed out (the defect of issue 5: locked DLQ rows, NULL reason)."""
    r = row(delivery_count=3, lock_token="old", locked_until_utc=NOW - timedelta(seconds=1))
    assert not deliverable(ctx()).evaluate(r)
    out = apply(receive_outcome(ctx()), r)
    assert out["_op"] == "upsert" and out["_handed"] is False
    assert out["lane"] == Lane.DEAD_LETTER
    assert out["dead_letter_reason"] == "MaxDeliveryCountExceeded"
    assert out["lock_token"] is None and out["locked_until_utc"] is None
    assert out["row_version"] == 5 and out["delivery_count"] == 3


def test_s6_7_a_held_lock_is_left_alone_even_past_the_last_delivery() -> None:
    r = row(delivery_count=3, lock_token="old", locked_until_utc=NOW + timedelta(seconds=5))
    out = apply(receive_outcome(ctx()), r)
    assert out["_op"] is None and out["lock_token"] == "old"


@pytest.mark.parametrize("dead_letter", [True, False])
def test_s8_2_expired_messages_are_never_delivered(dead_letter: bool) -> None:
    c = ctx(dead_letter_on_expiry=dead_letter)
    old = row(expires_at_utc=NOW - timedelta(seconds=1))
    assert not deliverable(c).evaluate(old)
    out = apply(receive_outcome(c), old)
    assert out["_handed"] is False
    if dead_letter:
        assert out["_op"] == "upsert" and out["lane"] == Lane.DEAD_LETTER
        assert out["dead_letter_reason"] == "TTLExpiredException"
    else:
        assert out["_op"] == "delete"
    inbox = row(origin="inbox", lane=None, delivery_count=0, _passed=True,
                expires_at_utc=NOW - timedelta(seconds=1))
    out = apply(receive_outcome(c), inbox)
    assert out["_op"] == ("upsert" if dead_letter else None)


def test_s7_2_nothing_expires_in_the_dead_letter_queue() -> None:
    c = ctx(main_queue=False)
    r = row(lane=Lane.DEAD_LETTER, delivery_count=10, expires_at_utc=NOW - timedelta(days=1))
    assert deliverable(c).evaluate(r)
    out = apply(receive_outcome(c), {**r, "_picked": True})
    assert out["lane"] == Lane.DEAD_LETTER and out["lock_token"] == "new"


def test_s8_4_a_scheduled_message_waits_and_is_not_handed_out_early() -> None:
    later = NOW + timedelta(minutes=5)
    r = row(origin="inbox", lane=None, delivery_count=0, _passed=True,
            scheduled_enqueue_time_utc=later)
    assert not deliverable(ctx()).evaluate(r)
    out = apply(receive_outcome(ctx()), r)
    assert out["_op"] == "upsert" and out["lane"] == Lane.SCHEDULED
    assert out["state"] == "Scheduled" and out["_handed"] is False
    due = row(lane=Lane.SCHEDULED, state="Scheduled", delivery_count=0,
              scheduled_enqueue_time_utc=NOW - timedelta(seconds=1), _picked=True)
    out = apply(receive_outcome(ctx()), due)
    assert out["lane"] == Lane.MAIN and out["state"] == "Active" and out["delivery_count"] == 1


def test_s5_6_deferred_and_locked_rows_are_not_deliverable() -> None:
    assert not deliverable(ctx()).evaluate(row(state="Deferred"))
    assert not deliverable(ctx()).evaluate(
        row(lock_token="t", locked_until_utc=NOW + timedelta(seconds=1)))
    assert deliverable(ctx()).evaluate(row(lock_token="t", locked_until_utc=NOW))


def test_s6_6_settling_needs_the_current_token_and_a_live_lock() -> None:
    live = row(lock_token="t", locked_until_utc=NOW + timedelta(seconds=1), _token="t")
    assert settle_valid(NOW).evaluate(live) is True
    assert not settle_valid(NOW).evaluate({**live, "_token": "other"})
    assert not settle_valid(NOW).evaluate({**live, "locked_until_utc": NOW})
    assert not settle_valid(NOW).evaluate({**live, "lock_token": None})


def settle(kind: str, r: dict, **kw) -> dict:
    return apply(settle_outcome(SettleContext(now=NOW, kind=kind, max_delivery_count=3, **kw)), r)


def test_s6_1_to_s6_5_settlements() -> None:
    held = row(lock_token="t", locked_until_utc=NOW + timedelta(seconds=9), _token="t")
    assert settle("complete", held)["_op"] == "delete"  # S6.1
    out = settle("abandon", held)  # S6.2
    assert out["lock_token"] is None and out["lane"] == Lane.MAIN
    out = settle("defer", held)  # S6.3
    assert out["lane"] == Lane.DEFERRED and out["state"] == "Deferred"
    out = settle("dead_letter", held, reason="r", description="d")  # S6.4
    assert (out["lane"], out["dead_letter_reason"], out["dead_letter_error_description"]) == (
        Lane.DEAD_LETTER, "r", "d")
    later = NOW + timedelta(minutes=1)
    out = settle("renew", held, renewed_until=later)  # S6.5
    assert out["locked_until_utc"] == later and out["row_version"] == 5


def test_s6_7_abandoning_the_last_delivery_dead_letters() -> None:
    held = row(delivery_count=3, lock_token="t", locked_until_utc=NOW + timedelta(1), _token="t")
    out = settle("abandon", held)
    assert out["lane"] == Lane.DEAD_LETTER
    assert out["dead_letter_reason"] == "MaxDeliveryCountExceeded"
    deferred = {**held, "lane": Lane.DEFERRED, "state": "Deferred"}
    assert settle("abandon", deferred)["lane"] == Lane.DEFERRED  # S6.3 [decided]


def test_s6_3_a_deferred_message_is_taken_only_when_unlocked() -> None:
    assert deferred_valid(NOW).evaluate(row(state="Deferred", lane=Lane.DEFERRED)) is True
    locked = row(state="Deferred", lock_token="t", locked_until_utc=NOW + timedelta(seconds=5))
    assert deferred_valid(NOW).evaluate(locked) is False
    assert deferred_valid(NOW).evaluate(row(state="Active")) is False


def test_s8_2_an_expired_deferred_message_is_not_taken_but_expires() -> None:
    gone = row(state="Deferred", lane=Lane.DEFERRED, expires_at_utc=NOW - timedelta(seconds=1))
    assert deferred_valid(NOW).evaluate(gone) is False
    assert deferred_expired(NOW).evaluate(gone) is True
    assert deferred_valid(NOW, main_queue=False).evaluate(gone) is True  # S7.2: no expiry
    assert deferred_expired(NOW, main_queue=False).evaluate(gone) is False
    live = row(state="Deferred", lane=Lane.DEFERRED, expires_at_utc=NOW + timedelta(seconds=1))
    assert deferred_valid(NOW).evaluate(live) is True
    assert deferred_expired(NOW).evaluate(live) is False
    out = apply(expiry_outcome(True), gone)
    assert out["lane"] == Lane.DEAD_LETTER and out["state"] == "Active"
    assert out["dead_letter_reason"] == "TTLExpiredException"
    assert apply(expiry_outcome(False), gone)["_op"] == "delete"


def test_s6_3_receive_deferred_locks_and_keeps_the_deferred_state() -> None:
    r = row(state="Deferred", lane=Lane.DEFERRED, delivery_count=2)
    out = apply(deferred_outcome(ctx()), r)
    assert out["_op"] == "upsert" and out["lock_token"] == "new"
    assert out["locked_until_utc"] == LOCK and out["delivery_count"] == 3
    assert "state" not in out and "lane" not in out  # an abandon puts it back (S6.3)
    assert apply(deferred_outcome(ctx(peek_lock=False)), r)["_op"] == "delete"


def test_s8_4_only_a_scheduled_message_not_yet_due_can_be_cancelled() -> None:
    future = row(state="Scheduled", scheduled_enqueue_time_utc=NOW + timedelta(hours=1))
    assert cancel_valid(NOW).evaluate(future) is True
    due = row(state="Scheduled", scheduled_enqueue_time_utc=NOW - timedelta(seconds=1))
    assert cancel_valid(NOW).evaluate(due) is False
    assert cancel_valid(NOW).evaluate(row()) is False
    assert apply(cancel_outcome(), future)["_op"] == "delete"


def test_s11_2_a_copy_within_the_window_is_a_duplicate() -> None:
    from sbqueue.core.duplicates import PREVIOUS_TIME, is_duplicate

    rule = is_duplicate(timedelta(minutes=10))
    at = {"enqueued_time_utc": NOW}
    assert rule.evaluate({**at, PREVIOUS_TIME: None}) is False
    assert rule.evaluate({**at, PREVIOUS_TIME: NOW - timedelta(minutes=10)}) is True
    assert rule.evaluate({**at, PREVIOUS_TIME: NOW - timedelta(minutes=11)}) is False
    assert rule.evaluate({**at, PREVIOUS_TIME: NOW}) is True  # within one send


def test_s12_2_a_transaction_row_that_never_committed_is_passed_never_stored() -> None:
    """A void row (its transaction can no longer commit) is passed by the cursor without a
    ledger row, even when it would have expired into the dead-letter queue."""
    c = ctx(dead_letter_on_expiry=True)
    plain = row(origin="inbox", lane=None, delivery_count=0, _passed=True,
                expires_at_utc=NOW - timedelta(seconds=1))
    assert apply(receive_outcome(c), plain)["_op"] == "upsert"  # dead-lettered (S8.2)
    void = {**plain, "_void": True}
    out = apply(receive_outcome(c), void)
    assert out["_op"] is None and out["_handed"] is False
    waiting = row(origin="inbox", lane=None, delivery_count=0, _passed=True, _void=True)
    assert apply(receive_outcome(ctx()), waiting)["_op"] is None


def test_s10_1_a_copy_without_session_on_a_session_subscription_is_dead_lettered() -> None:
    """The cursor passing a topic copy without a session id on a session subscription
    dead-letters it with 'Session ID is null'; with a session id it waits as usual."""
    c = ctx(requires_session=True)
    sessionless = row(origin="inbox", lane=None, delivery_count=0, _passed=True,
                      session_id=None)
    out = apply(receive_outcome(c), sessionless)
    assert (out["_op"], out["lane"], out["dead_letter_reason"]) == (
        "upsert", Lane.DEAD_LETTER, "Session ID is null")
    assert out["_handed"] is False
    in_session = {**sessionless, "session_id": "a"}
    out = apply(receive_outcome(c), in_session)
    assert (out["_op"], out["lane"]) == ("upsert", Lane.MAIN)
    assert apply(receive_outcome(ctx()), sessionless)["lane"] == Lane.MAIN  # a queue: kept


def test_s6_1_a_completion_record_written_while_the_lock_held_completes_its_message() -> None:
    """Decision 011: a completion record names the row's lock token (``_record_at``: when it
    was written). Written before the lock ended, it completes the message: a receive never
    hands it out again, even after the lock ran out, nor dead-letters it at its last
    delivery; it deletes the row. Written after the lock ended, it counts for nothing."""
    expired = row(lock_token="t", locked_until_utc=NOW - timedelta(seconds=5),
                  delivery_count=3)
    in_time = {**expired, "_record_at": NOW - timedelta(seconds=6)}
    assert not deliverable(ctx()).evaluate(in_time)
    out = apply(receive_outcome(ctx(dead_letter_on_expiry=True)), in_time)
    assert (out["_op"], out["_handed"], out["lane"]) == ("delete", False, Lane.MAIN)
    late = {**expired, "delivery_count": 1, "_record_at": NOW - timedelta(seconds=4)}
    assert deliverable(ctx()).evaluate(late)
    assert apply(receive_outcome(ctx()), {**late, "_picked": True})["_op"] == "upsert"
