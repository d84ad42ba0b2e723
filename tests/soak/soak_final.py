"""The end of a chaos soak, once every role process has stopped (issue 42 point 4):

1. ``settle_down``: wait until every lock the roles could hold has lapsed, then let the
   jobs finish what they owe: maintenance of the work queue (expiry: a message whose time
   to live passed leaves for its dead-letter queue, S8), forwarding until a round moves
   nothing, and maintenance of ``parking`` once the forwarded messages' own times to live
   have run out;
2. ``final_state``: every entity's SQL view and runtime counts;
3. ``drain``: the clients take every message out (peek-lock, then complete): each queue
   and subscription, its deferred messages by number, its dead-letter and transfer
   dead-letter queues, the sessions one by one. The forwarding sources' main queues are not
   drained: forwarding emptied them, and what it left there is stranded.

Each step of the drain is written to the history of the role ``final-drain`` (each receive
with the sub-queue it came out of), so the checker judges its deliveries as any other.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from soak_facts import FINAL, Counted, Stored
from soak_topology import (
    DEAD,
    DRAIN_LOCK,
    FORWARDS,
    MAIN,
    PARKING,
    SESSION_LOCK,
    SESSIONS,
    TOPIC,
    TRANSFER_DEAD,
    WORK,
    entities,
)

__all__ = ["drain", "final_state", "settle_down"]

TTL = 4.0  # the longest time to live a role gives (soak_roles.send_work)
ROUNDS = 12  # forwarding rounds at most, each until its sources are empty


def settle_down(root: str, stopped_at: float, latest_lock: float) -> None:
    """Wait for the locks to lapse (the longest lock after the stop, or the latest one a
    history names); expire the work queue's messages (maintenance: the only entity whose
    messages have a time to live), forward until a round moves nothing, wait for the
    forwarded messages' own times to live, and expire them at ``parking``."""
    from sbqueue import Namespace
    from sbqueue.engine.forward.job import forward_namespace
    from sbqueue.engine.maintain.job import Maintainer

    longest = max(SESSION_LOCK, DRAIN_LOCK).total_seconds()  # a receive killed before its
    lapse = max(stopped_at + longest, latest_lock) + 2.0  # record names no lock
    time.sleep(max(0.0, lapse - time.time()))
    namespace = Namespace(root)
    Maintainer(namespace, vacuum=False).run([WORK])
    for _ in range(ROUNDS):
        moved = forward_namespace(namespace)
        if not any(r.forwarded or r.transfer_dead_lettered for r in moved.values()):
            break
    time.sleep(TTL + 1.0)
    Maintainer(namespace, vacuum=False).run([PARKING])


def final_state(root: str) -> tuple[list[Stored], list[Counted]]:
    """Every message held at the end (the entities' views) and their runtime counts."""
    from sbqueue import Namespace
    from sbqueue.management import ServiceBusAdministrationClient

    namespace = Namespace(root)
    admin = ServiceBusAdministrationClient(root, spark=namespace.spark)
    stored: list[Stored] = []
    counted: list[Counted] = []
    for path in entities():
        for r in namespace.entity(path).messages().select(
                "message_id", "sequence_number", "partition_id", "sub_queue", "state"
        ).collect():
            stored.append(Stored(path, str(r[0]), int(r[1]), int(r[2]), str(r[3]), str(r[4])))
        props: Any
        if "/Subscriptions/" in path:
            topic, _, sub = path.split("/")
            props = admin.get_subscription_runtime_properties(topic, sub)
            scheduled = 0  # a subscription shows no scheduled message (S8.5)
        else:
            props = admin.get_queue_runtime_properties(path)
            scheduled = props.scheduled_message_count
        counted.append(Counted(
            path, props.active_message_count, scheduled, props.dead_letter_message_count,
            props.transfer_dead_letter_message_count, props.transfer_message_count,
            props.total_message_count))
    return stored, counted


def drain(root: str, logs: Path, hold: str | None = None) -> None:
    """Every message out, by the clients; ``hold``: a session another receiver keeps
    (the fault ``hold-session``, soak_faults)."""
    import soak_faults
    from soak_roles import Role

    from sbqueue import ServiceBusSubQueue

    role = Role(FINAL, root, logs / f"{FINAL}-0.jsonl", 0)
    for path in entities():
        for sub, name in ((None, MAIN), (ServiceBusSubQueue.DEAD_LETTER, DEAD),
                          (ServiceBusSubQueue.TRANSFER_DEAD_LETTER, TRANSFER_DEAD)):
            if sub is None and path in FORWARDS:
                continue
            try:
                if sub is None and path == SESSIONS:
                    with soak_faults.holding(role.client, path, hold):
                        _sessions(role)
                else:
                    _queue(role, path, sub, name)
            except Exception as exc:  # the drain must not fail: a crash, and on
                role.history.write("crash", ok=False, entity=path, sub_queue=name,
                                   error=f"drain: {type(exc).__name__}: {exc}"[:1500],
                                   at=time.time())
    role.history.write("drained", at=time.time())
    role.history.close()


def _receiver(role: Any, path: str, sub: Any, **kwargs: Any) -> Any:
    if "/Subscriptions/" in path:
        return role.client.get_subscription_receiver(TOPIC, path.rsplit("/", 1)[1],
                                                     sub_queue=sub, **kwargs)
    return role.client.get_queue_receiver(path, sub_queue=sub, **kwargs)


def _take(role: Any, r: Any, path: str, name: str) -> int:
    """Receive and complete until a receive comes back empty; how many came."""
    n = 0
    while True:
        started = time.time()
        got = r.receive_messages(max_message_count=50, max_wait_time=1)
        if not got:
            return n
        n += len(got)
        for message in got:
            role.received(path, message, started, sub_queue=name)
        for message in got:
            role.settle(r, path, message, "complete")


def _queue(role: Any, path: str, sub: Any, name: str) -> None:
    """One sub-queue: its messages, then its deferred ones (found by peeking)."""
    from sbqueue import ServiceBusMessageState

    with _receiver(role, path, sub, max_wait_time=1) as r:
        _take(role, r, path, name)
        deferred: list[int] = []
        while True:
            peeked = r.peek_messages(max_message_count=250)
            if not peeked:
                break
            deferred += [m.sequence_number for m in peeked
                         if m.state == ServiceBusMessageState.DEFERRED]
        for i in range(0, len(deferred), 50):
            started = time.time()
            got = r.receive_deferred_messages(deferred[i:i + 50])
            for message in got:
                role.received(path, message, started, sub_queue=name)
            for message in got:
                role.settle(r, path, message, "complete")


def _sessions(role: Any) -> None:
    """The session queue's main queue: the next available session until none is left."""
    from soak_roles import epoch

    from sbqueue import NEXT_AVAILABLE_SESSION
    from sbqueue.exceptions import OperationTimeoutError

    empty = 0
    while empty < 3:
        try:
            r = role.client.get_queue_receiver(SESSIONS, session_id=NEXT_AVAILABLE_SESSION,
                                               max_wait_time=5)
            r.__enter__()
        except OperationTimeoutError:
            return
        session = r.session
        lock = session.lock
        role.history.write("session_lock", entity=SESSIONS, session=session.session_id,
                           token=lock.token, until=epoch(lock.locked_until), at=time.time())
        try:
            empty = empty + 1 if _take(role, r, SESSIONS, MAIN) == 0 else 0
        finally:
            started = time.time()
            r.__exit__(None, None, None)
            role.history.write("session_release", entity=SESSIONS,
                               session=session.session_id, token=lock.token,
                               started=started, at=time.time())
