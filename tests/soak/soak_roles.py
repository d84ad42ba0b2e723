"""The roles of one chaos-soak process, each run in a loop in its own thread until it is
stopped (SIGTERM: finish the operation in hand) or killed (SIGKILL, by the chaos thread).

    python tests/soak/soak_roles.py ROLE[,ROLE...] NAMESPACE HISTORIES INCARNATION SEED

Every operation's outcome goes to the history (``soak_history``) before the next one. A
role's exception that is not a ``ServiceBusError`` is written as a ``crash`` (the checker's
``crashed``), and the role goes on. ``SBQUEUE_SOAK_FAULTS`` (``soak_faults``, the fault
tests only) makes some roles misbehave on purpose.
"""

from __future__ import annotations

import faulthandler
import random
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import soak_faults
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
from sbqueue.spark import get_session
from sbqueue.spark.session import store_conf

STOP = False


def _stop(*_: object) -> None:
    global STOP
    STOP = True


def stopped() -> bool:
    return STOP


def epoch(value: datetime | None) -> float | None:
    """Seconds since the epoch; Spark's timestamps come back naive, in UTC (the session's
    zone)."""
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()


def outlives_its_lock(message: Any) -> bool:
    """Whether the message is still there when its lock lapses: a complete faked on it must
    show as a second delivery. One whose time to live ends first expires unseen instead
    (S8.2, S8.3), which is right and shows nothing (a faulted soak of 2026-11-29 picked one with
    a 4 s time to live, and its fault went unseen)."""
    until, expires = message.locked_until_utc, message.expires_at_utc
    return until is not None and (expires is None or expires > until + timedelta(seconds=60))


class Role:
    """What every role shares: its client, history, random source and message ids."""

    def __init__(self, name: str, root: str, history: Path, seed: int) -> None:
        self.name = name
        self.root = root
        self.history = History(history, name)
        self.history_path = history
        self.rng = random.Random(seed)
        self.client = ServiceBusClient(root)
        self.counter = 0

    def new_id(self) -> str:
        self.counter += 1
        return f"{self.name}-{uuid.uuid4().hex[:8]}-{self.counter}"

    def received(self, entity: str, message: Any, started: float, mode: str = "peek_lock",
                 call: str | None = None, sub_queue: str | None = None) -> None:
        self.history.write(
            "receive", entity=entity, id=message.message_id, seq=message.sequence_number,
            token=message.lock_token, until=epoch(message.locked_until_utc),
            session=message.session_id, count=message.delivery_count, mode=mode,
            key=message.partition_key, started=started, at=time.time(), call=call,
            sub_queue=sub_queue)

    def send(self, entity: str, ids: tuple[str, ...], call: Callable[[], object],
             **fields: Any) -> bool:
        """One send call, with a begin event naming its messages (a kill inside it may have
        stored them); a refusal is written as a failed send."""
        token, started = uuid.uuid4().hex, time.time()
        self.history.write("send_begin", entity=entity, ids=ids, call=token, started=started)
        try:
            call()
        except ServiceBusError as exc:
            self.history.write("send", entity=entity, ids=ids, ok=False, call=token,
                               error=f"{type(exc).__name__}: {exc}"[:300], started=started,
                               at=time.time(), **fields)
            return False
        self.history.write("send", entity=entity, ids=ids, call=token, started=started,
                           at=time.time(), **fields)
        return True

    def settle(self, receiver: Any, entity: str, message: Any, action: str) -> bool:
        """One settlement, with a begin event (a kill inside it may have settled the
        message); whether it returned."""
        call = uuid.uuid4().hex
        started = time.time()
        fields = {"entity": entity, "seq": message.sequence_number,
                  "token": message.lock_token, "action": action, "call": call}
        self.history.write("settle_begin", started=started, **fields)
        try:
            if action == "complete" and outlives_its_lock(message) and soak_faults.fires(
                    "fake-complete", self.name):
                # the fault: a complete that returns and leaves the lock as it was
                soak_faults.note(self.history_path.parent, "fake-complete", entity=entity,
                                 seq=message.sequence_number, id=message.message_id)
            elif action == "dead_letter":
                receiver.dead_letter_message(message, reason="soak", error_description="why")
            else:
                getattr(receiver, f"{action}_message")(message)
        except ServiceBusError as exc:
            self.history.write("settle", ok=False, error=type(exc).__name__, started=started,
                               at=time.time(), **fields)
            return False
        except Exception as exc:
            self.history.write("settle", ok=False, error=f"crash: {type(exc).__name__}",
                               started=started, at=time.time(), **fields)
            raise
        self.history.write("settle", started=started, at=time.time(), **fields)
        return True


def sender(role: Role) -> None:
    """Client sends: single, batch, scheduled, sessions, duplicate ids, a chain, a topic."""
    kind = role.rng.choice(["single", "batch", "scheduled", "session", "dedupe", "chain",
                            "topic"])
    if soak_faults.fires("swap-numbers", role.name):
        soak_faults.swapped_sends(role)
    elif kind in ("single", "batch", "scheduled"):
        send_work(role, kind)
    elif kind == "session":
        send_session(role, f"s{role.rng.randrange(5)}")
    elif kind == "dedupe":
        message = f"dup-{role.name}-{role.rng.randrange(20)}"  # most ids come again
        send_one(role, DEDUPE, message)
    elif kind == "chain":
        send_one(role, chain_start(), role.new_id())
    else:
        send_topic(role, role.rng.randrange(1000))


def send_work(role: Role, kind: str) -> None:
    """One, five or one scheduled message to the work queue, a fifth with a 4 s TTL."""
    ttl = 4.0 if role.rng.random() < 0.2 else None
    ids = tuple(role.new_id() for _ in range(1 if kind != "batch" else 5))
    messages = [ServiceBusMessage(i, message_id=i, partition_key=role.rng.choice("abcdef"),
                                  time_to_live=None if ttl is None else timedelta(seconds=ttl))
                for i in ids]

    def call() -> None:
        with role.client.get_queue_sender(WORK) as s:
            if kind == "scheduled":
                s.schedule_messages(messages, datetime.now(timezone.utc) + timedelta(seconds=3))
            else:
                s.send_messages(messages)
    role.send(WORK, ids, call, ttl=ttl)


def send_one(role: Role, entity: str, message: str) -> None:
    def call() -> None:
        with role.client.get_queue_sender(entity) as s:
            s.send_messages(ServiceBusMessage(message, message_id=message))
    role.send(entity, (message,), call)


def send_topic(role: Role, n: int) -> None:
    message = role.new_id()

    def call() -> None:
        with role.client.get_topic_sender(TOPIC) as s:
            s.send_messages(ServiceBusMessage(message, message_id=message,
                                              application_properties={"n": n}))
    role.send(TOPIC, (message,), call, props={"n": n})


def send_session(role: Role, session: str) -> tuple[str, ...]:
    """Three messages to one session of the sessions queue; their ids."""
    ids = tuple(role.new_id() for _ in range(3))

    def call() -> None:
        with role.client.get_queue_sender(SESSIONS) as s:
            s.send_messages([ServiceBusMessage(i, message_id=i, session_id=session)
                             for i in ids])
    role.send(SESSIONS, ids, call, session=session)
    return ids


def frame_sender(role: Role) -> None:
    """A DataFrame send of 20 rows to the work queue."""
    namespace = Namespace(role.root)
    ids = tuple(role.new_id() for _ in range(20))
    frame = namespace.spark.createDataFrame([(i, i, role.rng.choice("abcdef")) for i in ids],
                                            "message_id string, body string, partition_key string")
    role.send(WORK, ids, lambda: namespace.entity(WORK).send_dataframe(frame))


def receiver(role: Role) -> None:
    """Peek-lock on the work queue (now and then the duplicate-detecting one): complete,
    abandon, defer then fetch by number, dead-letter, or let the lock run out."""
    entity = DEDUPE if role.rng.random() < 0.15 else WORK
    with role.client.get_queue_receiver(entity, max_wait_time=2) as r:
        started = time.time()
        got = r.receive_messages(max_message_count=5)
        for message in got:
            role.received(entity, message, started)
        for message in got:
            action = role.rng.choices(["complete", "abandon", "defer", "dead_letter", "expire"],
                                      [50, 15, 10, 10, 15])[0]
            if action == "expire":
                continue
            if role.settle(r, entity, message, action) and action == "defer":
                fetch_deferred(role, r, entity, message.sequence_number)


def fetch_deferred(role: Role, r: Any, entity: str, seq: int) -> None:
    """The message just deferred, by its number, then completed. Nothing back and no error
    is not a refusal: it raises (a crash)."""
    started = time.time()
    try:
        back = r.receive_deferred_messages([seq])
    except ServiceBusError as exc:  # e.g. expired meanwhile (S8)
        role.history.write("step", entity=entity, seq=seq, ok=False, started=started,
                           error=f"{type(exc).__name__}: {exc}"[:300], at=time.time())
        return
    if [m.sequence_number for m in back] != [seq]:
        raise RuntimeError(f"receive_deferred_messages([{seq}]) returned "
                           f"{[m.sequence_number for m in back]}")
    role.received(entity, back[0], started)
    role.settle(r, entity, back[0], "complete")


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
        try:
            got = r.receive_messages(max_message_count=5)
        except ServiceBusError as exc:  # refused: it took nothing
            role.history.write("step", entity=entity, call=call, ok=False, started=started,
                               error=f"{type(exc).__name__}: {exc}"[:300], at=time.time())
            return
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
                        "delivery_count", "partition_key").collect()
    for r in rows:
        role.history.write("receive", entity=path, id=r[0], seq=r[1], token=r[2],
                           until=epoch(r[3]), count=r[4], key=r[5], started=started,
                           at=time.time())
    if not rows:
        return
    call = uuid.uuid4().hex  # one call: each row's begin and end carry it and the row's number
    started = time.time()
    for r in rows:
        role.history.write("settle_begin", entity=path, seq=r[1], token=r[2],
                           action="complete", call=call, started=started)
    try:
        result = entity.complete_dataframe(batch)
    except ServiceBusError as exc:  # refused: none settled
        failed = dict.fromkeys((r[1] for r in rows), type(exc).__name__)
    else:
        failed = {**dict.fromkeys(result.lock_lost, "MessageLockLostError"),
                  **dict.fromkeys(result.already_settled, "MessageAlreadySettled")}
    for r in rows:
        role.history.write("settle", entity=path, seq=r[1], token=r[2], action="complete",
                           ok=r[1] not in failed, error=failed.get(r[1]), call=call,
                           started=started, at=time.time())


def session_worker(role: Role) -> None:
    """The next available session: its messages in order, its state, then release."""
    try:
        r = role.client.get_queue_receiver(SESSIONS, session_id=NEXT_AVAILABLE_SESSION,
                                           max_wait_time=2)
        r.__enter__()
    except ServiceBusError:
        return  # no session free: an empty turn
    session = r.session
    assert session is not None
    lock = session.lock
    role.history.write("session_lock", entity=SESSIONS, session=session.session_id,
                       token=lock.token, until=epoch(lock.locked_until), at=time.time())
    try:
        started = time.time()
        got = r.receive_messages(max_message_count=3)
        if len(got) > 1 and soak_faults.fires("reverse-session", role.name):
            got = got[::-1]  # the fault: written as if handed out last first
            soak_faults.note(role.history_path.parent, "reverse-session",
                             session=session.session_id,
                             seqs=[m.sequence_number for m in got])
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
        sends = [ServiceBusMessage(i, message_id=i, partition_key=message.partition_key)
                 for i in ids]
        try:
            with role.client.transaction() as t:
                t.complete_message(r, message)
                if soak_faults.fires("leaky-transaction", role.name):
                    soak_faults.note(role.history_path.parent, "leaky-transaction", tx=tx)
                    soak_faults.leak(s, sends)  # the fault: its sends escape, then it fails
                t.send_messages(s, sends)
        except ServiceBusError as exc:
            role.history.write("tx_end", tx=tx, ok=False, call=tx, started=started,
                               error=f"{type(exc).__name__}: {exc}"[:300], at=time.time())
            return
        role.history.write("tx_end", tx=tx, call=tx, started=started, at=time.time())
        role.history.write("send", entity=WORK, ids=ids, tx=tx, started=started,
                           at=time.time())


def forwarder(role: Role) -> None:
    """One forwarding batch at each source; ``moved``: the messages it forwarded. (A step
    without a bound goes on while the source refills: busy receivers dead-letter into the
    work queue's dead-letter queue as fast as a batch leaves it, and one step took 11
    minutes on a loaded machine.)"""
    from sbqueue.engine.forward.job import Forwarder, forwarding_sources

    namespace = Namespace(role.root)
    soak_faults.misforward(role, namespace)
    for path in forwarding_sources(namespace):
        started = time.time()
        result = Forwarder(namespace, path).step(max_batches=1)
        role.history.write("step", entity=path, moved=result.forwarded, ok=result.error is None,
                           error=result.error, started=started, at=time.time())


def maintainer(role: Role) -> None:
    """One maintenance step of one entity (a step over all of them outlives the kills)."""
    from sbqueue.engine.maintain.job import Maintainer

    path = role.rng.choice([*entities(), TOPIC])
    started = time.time()
    [report] = Maintainer(Namespace(role.root), vacuum=False).run([path])
    role.history.write("step", entity=path, moved=1, ok=report.error is None,
                       error=report.error, started=started, at=time.time())


ROLES: dict[str, Callable[[Role], None]] = {
    "sender": sender, "frame-sender": frame_sender, "receiver": receiver, "taker": taker,
    "drain": drain, "session-worker": session_worker, "transaction": transaction,
    "forwarder": forwarder, "maintainer": maintainer,
}


def run_role(role: Role) -> None:
    """One role's loop, until the process is told to stop. A turn that wrote nothing (an
    empty receive) writes a step: it returned, which is progress."""
    run = ROLES[role.name.split("#")[0]]
    # Spark's FAIR scheduler, a pool per role: a role's small jobs take turns with the
    # DataFrame drain's big ones instead of queueing behind them (FIFO starved the
    # receivers for minutes on two cores)
    get_session().sparkContext.setLocalProperty("spark.scheduler.pool", role.name)
    role.history.write("start", at=time.time())
    while not STOP:
        before = role.history.written
        try:
            if soak_faults.misbehave(role.name, stopped):
                continue  # a fault held this turn until the stop
            run(role)
        except ServiceBusError as exc:  # refused cleanly: noted, and on to the next
            role.history.write("step", ok=False, error=f"{type(exc).__name__}: {exc}"[:300],
                               at=time.time())
        except Exception as exc:  # anything else is a violation (the checker's "crashed")
            role.history.write("crash", ok=False, at=time.time(), error=(
                f"{type(exc).__name__}: {exc} | "
                + " / ".join(traceback.format_exc().strip().splitlines()[-6:]))[:1500])
        else:
            if role.history.written == before:
                role.history.write("step", at=time.time())
        time.sleep(role.rng.uniform(0.0, 0.3))
    role.history.close()


def main(argv: list[str]) -> None:
    """ROLES (comma separated) NAMESPACE HISTORIES INCARNATION SEED: each role in a thread
    of this process (one JVM: on two cores a JVM per role starves them all), each with its
    own history ``ROLE-INCARNATION.jsonl``. The roles start once Spark is up. SIGUSR1 writes
    every thread's Python stack to standard error (a role that seems stuck)."""
    names, root, logs, n, seed = argv[0].split(","), argv[1], Path(argv[2]), argv[3], int(argv[4])
    signal.signal(signal.SIGTERM, _stop)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: every stack
    get_session("soak-roles", extra_conf={"spark.scheduler.mode": "FAIR",
                                          **store_conf(root)})  # S3A for an S3 namespace
    Namespace(root)  # Spark's start, before any role's clock starts running
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
