"""The soak's entities: what is created, where each send's copies may end up, which
entities forward and which detect duplicates (what ``soak_check`` needs to know)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from soak_check import chain
from soak_history import Event

__all__ = ["DEAD", "DEDUPE", "FORWARDS", "MAIN", "PARKING", "SESSIONS", "SUBSCRIPTIONS",
           "TOPIC", "TRANSFER_DEAD", "WORK", "chain_end", "chain_start", "create", "entities",
           "places", "routes", "subscription_path"]

WORK = "work"  # partitioned, short locks, expiry to the dead-letter queue
# The work queue's dead letters are forwarded here; its own expired messages go to its
# dead-letter queue (a forwarded message keeps its time to live: without it, an expired
# message forwarded here would leave no trace, and "lost" could not be told from expired)
PARKING = "parking"
SESSIONS = "sessions"
DEDUPE = "dedupe"
CHAIN = ("chain-a", "chain-b", "chain-c")
TOPIC = "events"
# subscription -> (SQL filter, SQL action, whether a message with application property n
# matches)
SUBSCRIPTIONS: dict[str, tuple[str | None, str | None, Any]] = {
    "all": (None, None, lambda n: True),
    "even": ("n % 2 = 0", "SET tagged = TRUE", lambda n: n % 2 == 0),
}
# entity -> where it forwards: messages (forward_to) ...
FORWARDS = {CHAIN[0]: CHAIN[1], CHAIN[1]: CHAIN[2]}
# ... and dead letters (forward_dead_lettered_messages_to)
DEAD_LETTERS_TO = {WORK: PARKING}
LOCK = timedelta(seconds=15)  # some expire (receivers let them), most are settled in time
# The DataFrame drain's subscription: its receive of 50 and the read of their rows took
# 45-67 s with four JVMs on two cores (load 15), so a 15 s lock lapsed before any complete;
# in the full suite of 2026-11-29 (S3 tests beside it) it took 108.6 s, past a 90 s lock
DRAIN_LOCK = timedelta(seconds=150)
SESSION_LOCK = timedelta(seconds=30)


def chain_start() -> str:
    return CHAIN[0]


def chain_end() -> str:
    return CHAIN[-1]


def subscription_path(name: str) -> str:
    return f"{TOPIC}/Subscriptions/{name}"


def create(admin: Any) -> None:
    """Every entity of the soak, on a new namespace."""
    from sbqueue.management import RuleProperties, SqlRuleAction, SqlRuleFilter

    admin.create_queue(PARKING, dead_lettering_on_message_expiration=True)
    admin.create_queue(WORK, enable_partitioning=True, lock_duration=LOCK,
                       max_delivery_count=5, dead_lettering_on_message_expiration=True,
                       forward_dead_lettered_messages_to=PARKING)
    admin.create_queue(SESSIONS, requires_session=True, lock_duration=SESSION_LOCK,
                       enable_partitioning=True)
    admin.create_queue(DEDUPE, requires_duplicate_detection=True,
                       duplicate_detection_history_time_window=timedelta(hours=1))
    for name in reversed(CHAIN):
        admin.create_queue(name, lock_duration=LOCK, forward_to=FORWARDS.get(name))
    admin.create_topic(TOPIC, enable_partitioning=True)
    for name, (sql, action, _) in SUBSCRIPTIONS.items():
        rule = None if sql is None else RuleProperties(
            name, SqlRuleFilter(sql), None if action is None else SqlRuleAction(action))
        admin.create_subscription(TOPIC, name, default_rule=rule,
                                  lock_duration=DRAIN_LOCK if name == "even" else LOCK)


def entities() -> list[str]:
    """Every entity that holds messages (queues and subscriptions)."""
    return [WORK, PARKING, SESSIONS, DEDUPE, *CHAIN,
            *(subscription_path(s) for s in SUBSCRIPTIONS)]


# The sub-queues a message comes out of (the view's ``sub_queue`` names)
MAIN, DEAD, TRANSFER_DEAD = "Main", "DeadLetter", "TransferDeadLetter"


def places(send: Event, dead: bool | None) -> list[frozenset[tuple[str, str]]]:
    """Per copy of a send (as ``routes``): where the final drain may find it, as (entity,
    sub-queue). Forwarding sources are empty by then; a queue's dead-letter queue may hold
    what reached its maximum delivery count, or expired (expiry is lazy: maintenance
    expires a partition's head only, decision 010; a receive, the drain's too, moves the
    others). A work message that is ``dead`` (expired, or dead-lettered by a settlement that
    returned) is in a dead-letter queue or in ``parking``, never in work's main queue; one
    that is not known to be (``False``; ``None``: a dead-letter call a kill interrupted)
    may be there too."""
    if send.entity == TOPIC:
        return [frozenset({(route[0], MAIN), (route[0], DEAD)}) for route in routes(send)]
    end = routes(send)[0][-1]
    if end != PARKING:
        return [frozenset({(end, MAIN), (end, DEAD)})]
    dead_ends = {(WORK, DEAD), (PARKING, MAIN), (PARKING, DEAD)}
    return [frozenset(dead_ends if dead else dead_ends | {(WORK, MAIN)})]


def routes(send: Event) -> list[tuple[str, ...]]:
    """Where each copy of a send may be: along its forwarding chain, or (a topic) in each
    subscription whose filter matches."""
    if send.entity == TOPIC:
        n = send.props.get("n")
        return [(subscription_path(name),) for name, (_, _, hit) in SUBSCRIPTIONS.items()
                if n is not None and hit(n)]
    return [chain(send.entity, {**FORWARDS, **DEAD_LETTERS_TO})]
