"""The roles of one chaos-soak process, each run in a loop in its own thread until it is
stopped (SIGTERM: finish the operation in hand) or killed (SIGKILL, by the chaos thread).

    python tests/soak/soak_roles.py ROLE[,ROLE...] NAMESPACE HISTORIES INCARNATION SEED

Every operation's outcome goes to the history (``soak_history``) before the next one.
"""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from soak_history import History
from soak_topology import (
    DEDUPE,
    SESSIONS,
    TOPIC,
    WORK,
    chain_end,
    chain_start,
    entities,
    subscription_path,
)

from sbqueue import (
    NEXT_AVAILABLE_SESSION,
    Namespace,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
)
from sbqueue.exceptions import ServiceBusError

STOP = False


def _stop(*_: object) -> None:
    global STOP
    STOP = True


def _epoch(value: datetime | None) -> float | None:
    """Seconds since the epoch; Spark's timestamps come back naive, in UTC (the session's
    zone)."""
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()


class Role:
    """What every role shares: its client, history, random source and message ids."""

    def __init__(self, name: str, root: str, history: Path, seed: int) -> None:
        self.name = name
        self.root = root
        self.history = History(history, name)
        self.rng = random.Random(seed)
        self.client = ServiceBusClient(root)
        self.counter = 0

    def new_id(self) -> str:
        self.counter += 1
        return f"{self.name}-{uuid.uuid4().hex[:8]}-{self.counter}"

    def received(self, entity: str, message: Any, started: float, mode: str = "peek_lock",
                 call: str | None = None) -> None:
        self.history.write(
            "receive", entity=entity, id=message.message_id, seq=message.sequence_number,
            token=message.lock_token, until=_epoch(message.locked_until_utc),
            session=message.session_id, count=message.delivery_count, mode=mode,
            started=started, at=time.time(), call=call)

    def settle(self, receiver: Any, entity: str, message: Any, action: str) -> None:
        """One settlement, with a begin event for a complete (a kill inside it may have
        completed the message)."""
        call = uuid.uuid4().hex
        started = time.time()
        fields = {"entity": entity, "seq": message.sequence_number,
                  "token": message.lock_token, "action": action, "call": call}
        if action == "complete":
            self.history.write("settle_begin", started=started, **fields)
        try:
            if action == "dead_letter":
                receiver.dead_letter_message(message, reason="soak", error_description="why")
            else:
                getattr(receiver, f"{action}_message")(message)
        except ServiceBusError as exc:
            self.history.write("settle", ok=False, error=type(exc).__name__, started=started,
                               at=time.time(), **fields)
            return
        self.history.write("settle", started=started, at=time.time(), **fields)


def sender(role: Role) -> None:
    """Client sends: single, batch, scheduled, sessions, duplicate ids, a chain, a topic."""
    kind = role.rng.choice(["single", "batch", "scheduled", "session", "dedupe", "chain",
                            "topic"])
    started = time.time()
    if kind in ("single", "batch", "scheduled"):
        ttl = 4.0 if role.rng.random() < 0.2 else None
        ids = [role.new_id() for _ in range(1 if kind != "batch" else 5)]
        messages = [ServiceBusMessage(i, message_id=i, partition_key=role.rng.choice("abcdef"),
                                      time_to_live=None if ttl is None
                                      else timedelta(seconds=ttl)) for i in ids]
        with role.client.get_queue_sender(WORK) as s:
            if kind == "scheduled":
                s.schedule_messages(messages, datetime.now(timezone.utc) + timedelta(seconds=3))
            else:
                s.send_messages(messages)
        role.history.write("send", entity=WORK, ids=tuple(ids), ttl=ttl, started=started,
                           at=time.time())
    elif kind == "session":
        send_session(role, f"s{role.rng.randrange(5)}")
    elif kind == "dedupe":
        message = f"dup-{role.name}-{role.rng.randrange(1000)}"  # some ids come twice
        with role.client.get_queue_sender(DEDUPE) as s:
            s.send_messages(ServiceBusMessage(message, message_id=message))
        role.history.write("send", entity=DEDUPE, ids=(message,), started=started,
                           at=time.time())
    elif kind == "chain":
        message = role.new_id()
        with role.client.get_queue_sender(chain_start()) as s:
            s.send_messages(ServiceBusMessage(message, message_id=message))
        role.history.write("send", entity=chain_start(), ids=(message,), started=started,
                           at=time.time())
    else:
        n = role.rng.randrange(1000)
        message = role.new_id()
        with role.client.get_topic_sender(TOPIC) as s:
            s.send_messages(ServiceBusMessage(message, message_id=message,
                                              application_properties={"n": n}))
        role.history.write("send", entity=TOPIC, ids=(message,), props={"n": n},
                           started=started, at=time.time())


def send_session(role: Role, session: str) -> None:
    """Three messages to one session of the sessions queue."""
    started = time.time()
    ids = [role.new_id() for _ in range(3)]
    with role.client.get_queue_sender(SESSIONS) as s:
        s.send_messages([ServiceBusMessage(i, message_id=i, session_id=session) for i in ids])
    role.history.write("send", entity=SESSIONS, ids=tuple(ids), session=session,
                       started=started, at=time.time())


def frame_sender(role: Role) -> None:
    """A DataFrame send of 20 rows to the work queue."""
    namespace = Namespace(role.root)
    ids = [role.new_id() for _ in range(20)]
    started = time.time()
    frame = namespace.spark.createDataFrame([(i, i, role.rng.choice("abcdef")) for i in ids],
                                            "message_id string, body string, partition_key string")
    namespace.entity(WORK).send_dataframe(frame)
    role.history.write("send", entity=WORK, ids=tuple(ids), started=started, at=time.time())


def receiver(role: Role) -> None:
    """Peek-lock on the work queue: complete, abandon, defer then fetch, dead-letter, or
    let the lock run out."""
    with role.client.get_queue_receiver(WORK, max_wait_time=2) as r:
        started = time.time()
        got = r.receive_messages(max_message_count=5)
        for message in got:
            role.received(WORK, message, started)
        for message in got:
            action = role.rng.choices(["complete", "abandon", "defer", "dead_letter", "expire"],
                                      [50, 15, 10, 10, 15])[0]
            if action == "expire":
                continue
            role.settle(r, WORK, message, action)
            if action == "defer":
                started = time.time()
                try:
                    [back] = r.receive_deferred_messages([message.sequence_number])
                except ServiceBusError:
                    continue
                role.received(WORK, back, started)
                role.settle(r, WORK, back, "complete")


def taker(role: Role) -> None:
    """Receive-and-delete at the chain's end or on the unfiltered subscription."""
    mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
    if role.rng.random() < 0.5:
        entity = chain_end()
        opened = role.client.get_queue_receiver(entity, receive_mode=mode, max_wait_time=2)
    else:
        entity = subscription_path("all")
        opened = role.client.get_subscription_receiver(TOPIC, "all", receive_mode=mode,
                                                       max_wait_time=2)
    call = uuid.uuid4().hex
    with opened as r:
        started = time.time()
        role.history.write("receive_begin", entity=entity, mode="receive_and_delete", count=5,
                           call=call, started=started)
        got = r.receive_messages(max_message_count=5)
        for message in got:
            role.received(entity, message, started, "receive_and_delete", call)
        role.history.write("step", entity=entity, call=call, started=started, at=time.time())


def drain(role: Role) -> None:
    """DataFrame receive and complete on the filtered subscription."""
    namespace = Namespace(role.root)
    path = subscription_path("even")
    entity = namespace.entity(path)
    started = time.time()
    batch = entity.receive_dataframe(50).localCheckpoint()
    rows = batch.select("message_id", "sequence_number", "lock_token", "locked_until_utc",
                        "delivery_count").collect()
    for r in rows:
        role.history.write("receive", entity=path, id=r[0], seq=r[1], token=r[2],
                           until=_epoch(r[3]), count=r[4], started=started, at=time.time())
    if not rows:
        return
    call = uuid.uuid4().hex
    started = time.time()
    for r in rows:
        role.history.write("settle_begin", entity=path, seq=r[1], token=r[2],
                           action="complete", call=f"{call}-{r[1]}", started=started)
    result = entity.complete_dataframe(batch)
    failed = {**dict.fromkeys(result.lock_lost, "MessageLockLostError"),
              **dict.fromkeys(result.already_settled, "MessageAlreadySettled")}
    for r in rows:
        role.history.write("settle", entity=path, seq=r[1], token=r[2], action="complete",
                           ok=r[1] not in failed, error=failed.get(r[1]),
                           call=f"{call}-{r[1]}", started=started, at=time.time())


def session_worker(role: Role) -> None:
    """The next available session: its messages in order, its state, then release."""
    try:
        r = role.client.get_queue_receiver(SESSIONS, session_id=NEXT_AVAILABLE_SESSION,
                                           max_wait_time=2)
        r.__enter__()
    except ServiceBusError:
        return
    session = r.session
    assert session is not None
    lock = session.lock
    role.history.write("session_lock", entity=SESSIONS, session=session.session_id,
                       token=lock.token, until=_epoch(lock.locked_until), at=time.time())
    try:
        started = time.time()
        got = r.receive_messages(max_message_count=3)
        for message in got:
            role.received(SESSIONS, message, started)
        for message in got:
            role.settle(r, SESSIONS, message, "complete")
        session.set_state(f"{role.name}:{len(got)}")
    except ServiceBusError as exc:
        role.history.write("step", entity=SESSIONS, ok=False, error=type(exc).__name__,
                           at=time.time())
    finally:
        started = time.time()
        r.__exit__(None, None, None)
        role.history.write("session_release", entity=SESSIONS, session=session.session_id,
                           token=lock.token, started=started, at=time.time())


def transaction(role: Role) -> None:
    """Receive one work message, then complete it and send two more to the work queue in one
    transaction: one entity, one partition (S12.1, S12.3), so the sends carry the received
    message's partition key."""
    with role.client.get_queue_receiver(WORK, max_wait_time=2) as r, \
            role.client.get_queue_sender(WORK) as s:
        started = time.time()
        got = r.receive_messages(max_message_count=1)
        if not got:
            return
        [message] = got
        role.received(WORK, message, started)
        tx, ids = uuid.uuid4().hex, (role.new_id(), role.new_id())
        started = time.time()
        role.history.write("tx_begin", entity=WORK, tx=tx, ids=ids, call=tx,
                           locks=((message.sequence_number, message.lock_token),),
                           started=started)
        try:
            with role.client.transaction() as t:
                t.complete_message(r, message)
                t.send_messages(s, [ServiceBusMessage(i, message_id=i,
                                                      partition_key=message.partition_key)
                                    for i in ids])
        except ServiceBusError as exc:
            role.history.write("tx_end", tx=tx, ok=False, call=tx, started=started,
                               error=f"{type(exc).__name__}: {exc}"[:300], at=time.time())
            return
        role.history.write("tx_end", tx=tx, call=tx, started=started, at=time.time())
        role.history.write("send", entity=WORK, ids=ids, tx=tx, started=started,
                           at=time.time())


def forwarder(role: Role) -> None:
    from sbqueue.engine.forward import Forwarder, forwarding_sources

    namespace = Namespace(role.root)
    for path in forwarding_sources(namespace):
        started = time.time()
        Forwarder(namespace, path).step()
        role.history.write("step", entity=path, started=started, at=time.time())


def maintainer(role: Role) -> None:
    """One maintenance step of one entity (a step over all of them outlives the kills)."""
    from sbqueue.engine.maintain import Maintainer

    path = role.rng.choice([*entities(), TOPIC])
    started = time.time()
    Maintainer(Namespace(role.root), vacuum=False).run([path])
    role.history.write("step", entity=path, started=started, at=time.time())


ROLES: dict[str, Callable[[Role], None]] = {
    "sender": sender, "frame-sender": frame_sender, "receiver": receiver, "taker": taker,
    "drain": drain, "session-worker": session_worker, "transaction": transaction,
    "forwarder": forwarder, "maintainer": maintainer,
}


def run_role(role: Role) -> None:
    """One role's loop, until the process is told to stop."""
    run = ROLES[role.name.split("#")[0]]
    while not STOP:
        try:
            run(role)
        except ServiceBusError as exc:  # refused cleanly: noted, and on to the next
            role.history.write("step", ok=False, error=f"{type(exc).__name__}: {exc}"[:300],
                               at=time.time())
        time.sleep(role.rng.uniform(0.0, 0.3))
    role.history.close()


def main(argv: list[str]) -> None:
    """ROLES (comma separated) NAMESPACE HISTORIES INCARNATION SEED: each role in a thread
    of this process (one JVM: on two cores a JVM per role starves them all), each with its
    own history ``ROLE-INCARNATION.jsonl``."""
    names, root, logs, n, seed = argv[0].split(","), argv[1], Path(argv[2]), argv[3], int(argv[4])
    signal.signal(signal.SIGTERM, _stop)
    threads = []
    for k, name in enumerate(names):
        history = logs / f"{name.replace('#', '_')}-{n}.jsonl"
        role = Role(name, root, history, seed * 100 + k)
        threads.append(threading.Thread(target=run_role, args=(role,), name=name))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main(sys.argv[1:])
