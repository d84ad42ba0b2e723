"""Faults put into a chaos soak on purpose, so that its checker can be seen to bite (issue 42
point 6): ``soak.py --fault NAME`` (the fault tests only). Each fault breaks one promise
and the checker must name the invariant it breaks.

In the role processes (``SBQUEUE_SOAK_FAULTS``, comma separated ``name`` or ``name=role``;
each fires once per process):

- ``raise``: the role (default ``sender#2``) raises a ``RuntimeError`` on its third turn;
- ``hang``: the role (default ``maintainer``) stops working on its second turn, until the
  process is told to stop;
- ``fake-complete``: one complete of ``receiver`` returns without settling (the lock stays;
  the message is delivered again once it lapses);
- ``drop-forward`` / ``astray-forward`` / ``double-forward``: the forwarder takes one
  message off ``chain-a`` behind the histories' back and drops it, sends it to ``parking``,
  or sends it on to ``chain-b`` twice;
- ``leaky-transaction``: one transaction's sends are made outside it, then it fails;
- ``reverse-session``: a session worker writes one receive's messages last first (an
  engine handing a session's messages out of order, as the history would show it);
- ``swap-numbers``: a sender sends two messages to one partition and writes the second
  send as if it had returned before the first began (a later send numbered lower).

In the runner (``runner_faults``, during the chaos; the engine's clock jumps in the runner
process only, for one call): ``lock-twice`` (a session's message received, then received
again by a second holder that took the session with the clock past the first one's lock),
``session-twice`` (a session taken, then taken again with the clock past its lock),
``dedupe-jump`` (a duplicate-detection id sent again with the clock past the window).
After the run (``after_run``): ``delete-row`` (a held message's ledger row deleted with
delta-rs, behind the engine's back) and, during the final drain, ``hold-session``
(``holding``: a session kept locked and renewed, so the drain cannot take its messages).
What each did is one line of ``faults.jsonl`` in the histories' folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

__all__ = ["ENV", "RUNNER_FAULTS", "after_run", "fires", "holding", "leak", "misbehave",
           "misforward", "note", "runner_faults", "swapped_sends"]

ENV = "SBQUEUE_SOAK_FAULTS"
DEFAULT_ROLE = {"raise": "sender#2", "hang": "maintainer", "fake-complete": "receiver",
                "drop-forward": "forwarder", "astray-forward": "forwarder",
                "double-forward": "forwarder", "leaky-transaction": "transaction",
                "reverse-session": "session-worker", "swap-numbers": "sender"}
RUNNER_FAULTS = ("lock-twice", "session-twice", "dedupe-jump", "delete-row", "hold-session")
_fired: set[str] = set()
_turns: dict[str, int] = {}
_guard = threading.Lock()


def _configured() -> dict[str, str]:
    out = {}
    for item in filter(None, os.environ.get(ENV, "").split(",")):
        name, _, role = item.partition("=")
        out[name] = role or DEFAULT_ROLE.get(name, "")
    return out


def _pending(name: str, role: str) -> bool:
    return _configured().get(name) == role and name not in _fired


def fires(name: str, role: str) -> bool:
    """Whether fault ``name`` is set for ``role`` and has not fired in this process yet;
    if so it fires now."""
    with _guard:
        if not _pending(name, role):
            return False
        _fired.add(name)
        return True


def note(logs: Path, fault: str, **details: Any) -> None:
    """One line of ``faults.jsonl``: what a fault did (for the tests and the table)."""
    with (logs / "faults.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"fault": fault, "pid": os.getpid(), **details}) + "\n")


def misbehave(role: str, stopped: Callable[[], bool]) -> bool:
    """At the start of each of ``role``'s turns: ``raise`` and ``hang``; whether the turn is
    over (it hung until the process was told to stop)."""
    with _guard:
        _turns[role] = _turns.get(role, 0) + 1
        turn = _turns[role]
    if turn >= 3 and fires("raise", role):
        raise RuntimeError(f"injected fault: {role} raises")
    if turn >= 2 and fires("hang", role):
        while not stopped():
            time.sleep(0.5)
        return True
    return False


def swapped_sends(role: Any) -> None:
    """Two sends to one partition of the work queue; the second written as if it had
    returned a second before the first began."""
    from soak_topology import WORK

    from sbqueue import ServiceBusMessage

    first, second = role.new_id(), role.new_id()
    began = time.time()
    for message in (first, second):
        with role.client.get_queue_sender(WORK) as s:
            s.send_messages(ServiceBusMessage(message, message_id=message, partition_key="z"))
    ended = time.time()
    for message, started, at in ((second, began - 2, began - 1), (first, began, ended)):
        role.history.write("send_begin", entity=WORK, ids=(message,), call=message,
                           started=started)
        role.history.write("send", entity=WORK, ids=(message,), call=message,
                           started=started, at=at)
    note(role.history_path.parent, "swap-numbers", ids=[first, second])


def leak(sender: Any, messages: list[Any]) -> None:
    """A transaction's sends made outside it; then the transaction fails."""
    from sbqueue.exceptions import ServiceBusError

    sender.send_messages(messages)
    raise ServiceBusError("injected fault: a transaction whose sends escaped it")


def misforward(role: Any, namespace: Any) -> None:
    """The forwarder's faults: one ``chain-a`` message each, taken with receive-and-delete
    (no history line), then dropped, sent astray, or sent on twice."""
    from soak_topology import CHAIN, PARKING

    from sbqueue import ServiceBusMessage, ServiceBusReceiveMode

    for fault, to in (("drop-forward", ()), ("astray-forward", (PARKING,)),
                      ("double-forward", (CHAIN[1], CHAIN[1]))):
        if not _pending(fault, role.name):
            continue
        with role.client.get_queue_receiver(
                CHAIN[0], receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                max_wait_time=1) as r:
            got = r.receive_messages(max_message_count=1)
        if not got:
            return
        _fired.add(fault)
        message = got[0]
        for entity in to:
            with role.client.get_queue_sender(entity) as s:
                s.send_messages(ServiceBusMessage(str(message), message_id=message.message_id))
        note(role.history_path.parent, fault, id=message.message_id, to=list(to))


@contextlib.contextmanager
def _jumped(by: timedelta) -> Iterator[None]:
    """The engine's clock in this process, moved ahead by ``by`` for one call."""
    from sbqueue.core import clock

    clock.advance(by)
    try:
        yield
    finally:
        clock.reset()


def runner_faults(role: Any, names: list[str]) -> None:
    """The runner's faults during the chaos, each written to ``role``'s history as what a
    client saw (the receives, settlements, session locks and sends)."""
    logs = role.history_path.parent
    if "lock-twice" in names:
        _lock_twice(role, logs)
    if "session-twice" in names:
        _session_twice(role, logs)
    if "dedupe-jump" in names:
        from soak_topology import DEDUPE

        from sbqueue import ServiceBusMessage

        message = f"dup-jump-{role.new_id()}"
        for jump in (timedelta(0), timedelta(hours=1, minutes=5)):
            with _jumped(jump), role.client.get_queue_sender(DEDUPE) as s:
                role.send(DEDUPE, (message,),
                          lambda s=s: s.send_messages(ServiceBusMessage(message,
                                                                        message_id=message)))
        note(logs, "dedupe-jump", id=message)


def _first_holder(role: Any, session: str) -> Any:
    """A receiver holding ``session``, taken before its messages are sent: a session
    worker taking the next available session cannot take it first (the fault would then
    fail to be put in, not be caught)."""
    from soak_roles import send_session
    from soak_topology import SESSIONS

    r = role.client.get_queue_receiver(SESSIONS, session_id=session, max_wait_time=5)
    r.__enter__()
    send_session(role, session)
    return r


def _second_holder(role: Any, session: str) -> Any:
    """A receiver that takes ``session`` with this process's clock past the first one's
    lock."""
    from soak_topology import SESSION_LOCK, SESSIONS

    with _jumped(SESSION_LOCK + timedelta(seconds=5)):
        r = role.client.get_queue_receiver(SESSIONS, session_id=session, max_wait_time=5)
        r.__enter__()
    return r


def _lock_twice(role: Any, logs: Path) -> None:
    """A message of a new session received by the session's holder, then received again
    by a second holder that took the session with the clock past the first one's lock: two
    holders of one message. (Through a session: its receives are decided on the driver, in
    seconds however busy the machine; a deferred message's fetch by number is a Spark job
    that can outlast any lock there.)"""
    from soak_topology import SESSION_LOCK, SESSIONS

    from sbqueue.exceptions import ServiceBusError

    session = f"lock-{role.new_id()}"
    held, seqs = [_first_holder(role, session)], []
    for jump in (timedelta(0), SESSION_LOCK + timedelta(seconds=5)):
        if jump:
            held.append(_second_holder(role, session))
        with _jumped(jump):
            started = time.time()
            got = held[-1].receive_messages(max_message_count=1)
        role.received(SESSIONS, got[0], started)
        seqs.append(got[0].sequence_number)
    time.sleep(1.0)
    for r in reversed(held):
        with contextlib.suppress(ServiceBusError):
            r.__exit__(None, None, None)
    note(logs, "lock-twice", entity=SESSIONS, seq=seqs[0], seqs=seqs, session=session)


def _session_twice(role: Any, logs: Path) -> None:
    """A session taken, then taken again by a second receiver with the clock past the first
    one's lock: two holders of one session."""
    from soak_roles import epoch
    from soak_topology import SESSIONS

    from sbqueue.exceptions import ServiceBusError

    session = f"fault-{role.new_id()}"
    held = []
    for r in (_first_holder(role, session), None):
        r = r or _second_holder(role, session)
        lock = r.session.lock
        role.history.write("session_lock", entity=SESSIONS, session=session,
                           token=lock.token, until=epoch(lock.locked_until),
                           at=time.time())
        held.append((r, lock.token))
    time.sleep(1.0)
    for r, token in reversed(held):
        started = time.time()
        with contextlib.suppress(ServiceBusError):
            r.__exit__(None, None, None)
        role.history.write("session_release", entity=SESSIONS, session=session,
                           token=token, started=started, at=time.time())
    note(logs, "session-twice", session=session)


def after_run(root: str, logs: Path, names: list[str]) -> str | None:
    """``delete-row``: one held message's ledger row deleted with delta-rs (the engine
    never hears of it). ``hold-session``: three messages sent to a new session, which the
    final drain will find held (``holding``); its id."""
    if "delete-row" in names:
        _delete_row(root, logs)
    if "hold-session" not in names:
        return None
    from soak_roles import Role, send_session

    role = Role("fault", root, logs / "fault-1.jsonl", 0)
    session = f"held-{role.new_id()}"
    ids = send_session(role, session)
    role.history.close()
    note(logs, "hold-session", session=session, ids=list(ids))
    return session


def _delete_row(root: str, logs: Path) -> None:
    from deltalake import DeltaTable
    from soak_topology import entities

    from sbqueue import Namespace

    namespace = Namespace(root)
    for path in entities():
        entity = namespace.entity(path)
        shown = {int(r[0]) for r in entity.messages().select("sequence_number").collect()}
        table = DeltaTable(entity.ledger.path)
        rows = table.to_pyarrow_table(
            columns=["partition_id", "lane", "sequence_number", "message_id", "row_type"],
            filters=[("row_type", "=", "m")]).to_pylist()
        held = sorted((r for r in rows if r["lane"] == "main"
                       and r["sequence_number"] in shown), key=lambda r: r["sequence_number"])
        if held:
            row = held[0]
            table.delete(f"partition_id = {row['partition_id']} AND lane = 'main' AND "
                         f"row_type = 'm' AND sequence_number = {row['sequence_number']}")
            note(logs, "delete-row", entity=path, seq=row["sequence_number"],
                 id=row["message_id"])
            return


@contextlib.contextmanager
def holding(client: Any, entity: str, session: str | None) -> Iterator[None]:
    """``hold-session``: while the drain runs, ``session`` of ``entity`` stays locked by
    another receiver, its lock renewed every 5 s."""
    if session is None:
        yield
        return
    from sbqueue.exceptions import ServiceBusError

    receiver = client.get_queue_receiver(entity, session_id=session, max_wait_time=5)
    receiver.__enter__()
    done = threading.Event()

    def renew() -> None:
        while not done.wait(5.0):
            with contextlib.suppress(ServiceBusError):
                receiver.session.renew_lock()

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        yield
    finally:
        done.set()
        renewer.join()
        with contextlib.suppress(ServiceBusError):
            receiver.__exit__(None, None, None)
