"""Issue 43 point 2: the two executors are one engine. Random operation sequences
(Hypothesis stateful) run through the client on two namespaces at once: a reference on the
local executor and a subject on the Spark executor (``SBQUEUE_EXECUTOR=spark``), or, in the
mixed variant, a subject whose operations alternate between the executors on one namespace.
After every step, what each reader sees must be the same: the messages a receive handed
out (numbers, bodies, delivery counts), what a settlement said (or the error it raised),
peek of the queue and of its dead-letter queue (numbers, bodies, states, delivery counts,
reasons) and the counts (S16.2). Time moves by the engine's clock (``core.clock``), so
locks lapse (S6.6), scheduled messages activate (S8.4) and messages expire into the
dead-letter queue (S8.1) at the same step on both.

A one-partition queue (Standard without partitioning, S1.2) makes every receive's choice
determined by the rules alone, so two executors given the same steps must agree message
for message.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from sbqueue import (
    ServiceBusAdministrationClient,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusSubQueue,
)
from sbqueue.core import clock
from sbqueue.exceptions import ServiceBusError
from sbqueue.store.executor import ENV

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LOCK = timedelta(minutes=5)  # far longer than a step takes on either executor
TTL = timedelta(minutes=20)
WAIT = 1.0  # a receive's max_wait_time, seconds: an empty queue answers soon on both
KINDS = ("complete", "abandon", "defer", "dead_letter")


@contextmanager
def executor(name: str) -> Iterator[None]:
    """Run the block on ``name`` (``SBQUEUE_EXECUTOR`` is read at each operation)."""
    before = os.environ.get(ENV)
    os.environ[ENV] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


class Side:
    """One namespace's client, its queue's sender and receivers, and the messages it holds
    locked, by sequence number."""

    def __init__(self, spark: Any, root: str, executors: Callable[[], str]) -> None:
        self.executors = executors  # which executor the next operation runs on
        with executor(executors()):
            admin = ServiceBusAdministrationClient(root, spark=spark)
            admin.create_queue("q", lock_duration=LOCK, max_delivery_count=3,
                               default_message_time_to_live=TTL,
                               dead_lettering_on_message_expiration=True)
            admin.create_queue("s", lock_duration=LOCK, requires_session=True)
        self.admin = admin
        self.client = ServiceBusClient(root, spark=spark)
        self.sender = self.client.get_queue_sender("q")
        self.receiver = self.client.get_queue_receiver("q", max_wait_time=WAIT)
        self.dead = self.client.get_queue_receiver(
            "q", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=WAIT)
        self.held: dict[int, Any] = {}
        self.session_sender = self.client.get_queue_sender("s")

    def run(self, step: Callable[[], Any]) -> Any:
        """``step()`` on this side's next executor: its result, or the name of the sbqueue
        error it raised (both sides must refuse alike). Any other error fails the test."""
        with executor(self.executors()):
            try:
                return step()
            except ServiceBusError as exc:  # compared by kind across the two sides
                return type(exc).__name__

    def seen(self) -> tuple[Any, ...]:
        """What every reader sees: peek of the queue and of its dead-letter queue from their
        first message (a receiver's peek otherwise continues after its last, S9.1), counts.
        A failed read fails the test: it is not an answer to compare."""
        def read() -> tuple[Any, ...]:
            main = [(m.sequence_number, str(m), m.state.name, m.delivery_count)
                    for m in self.receiver.peek_messages(100, sequence_number=1)]
            dead = [(m.sequence_number, str(m), m.delivery_count, m.dead_letter_reason)
                    for m in self.dead.peek_messages(100, sequence_number=1)]
            props = self.admin.get_queue_runtime_properties("q")
            counts = (props.active_message_count, props.scheduled_message_count,
                      props.dead_letter_message_count, props.total_message_count)
            sessions = self.admin.get_queue_runtime_properties("s").active_message_count
            return main, dead, counts, sessions
        with executor(self.executors()):
            return read()

    def hold(self, got: list[Any]) -> Any:
        """Keep the locked messages a receive handed out; what it handed out."""
        self.held.update({m.sequence_number: m for m in got})
        return _handed(got)

    def close(self) -> None:
        self.client.close()


def _handed(messages: Any) -> Any:
    if isinstance(messages, str):
        return messages
    return [(m.sequence_number, str(m), m.delivery_count) for m in messages]


class Differential(RuleBasedStateMachine):
    """The same steps on a reference (local executor) and a subject; the same answers."""

    spark: Any = None
    base: str = ""
    subject_executors: Callable[[int], str] = staticmethod(lambda n: "spark")

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0
        self.steps = 0
        run = uuid.uuid4().hex[:8]
        self.ref = Side(self.spark, f"{self.base}/ref-{run}", lambda: "local")
        self.sub = Side(self.spark, f"{self.base}/sub-{run}",
                        lambda: type(self).subject_executors(self.steps))

    @initialize(count=st.integers(3, 6), taken=st.integers(1, 2))
    def start(self, count: int, taken: int) -> None:
        """Messages waiting and some of them locked from the first step on, so that every
        example receives from a queue holding more than it asks and settles."""
        clock.reset()
        self.send(count, expiring=False)
        self.receive(taken)

    def both(self, step: Callable[[Side], Any]) -> Any:
        """``step`` on each side; the answers must be equal."""
        self.steps += 1
        ref, sub = self.ref.run(lambda: step(self.ref)), self.sub.run(lambda: step(self.sub))
        assert sub == ref, f"step {self.steps}: reference {ref!r}, subject {sub!r}"
        return ref

    @rule(count=st.integers(1, 3), expiring=st.booleans())
    def send(self, count: int, expiring: bool) -> None:
        ttl = timedelta(minutes=2) if expiring else None
        bodies = [f"m{self.sent + i}" for i in range(count)]
        self.sent += count
        self.both(lambda s: s.sender.send_messages(
            [ServiceBusMessage(b, time_to_live=ttl) for b in bodies]))

    @rule(minutes=st.integers(1, 3))
    def schedule(self, minutes: int) -> None:
        body = f"m{self.sent}"
        self.sent += 1
        self.both(lambda s: s.sender.schedule_messages(
            ServiceBusMessage(body), clock.utcnow() + timedelta(minutes=minutes)))

    @rule(count=st.integers(1, 4))
    def receive(self, count: int) -> None:
        def step(s: Side) -> Any:
            got = s.receiver.receive_messages(count, max_wait_time=WAIT)
            return s.hold(got)
        self.both(step)

    @precondition(lambda self: bool(self.ref.held))
    @rule(data=st.data(), kind=st.sampled_from(KINDS))
    def settle(self, data: st.DataObject, kind: str) -> None:
        seq = data.draw(st.sampled_from(sorted(self.ref.held)))

        def step(s: Side) -> Any:
            message = s.held.pop(seq)
            if kind == "dead_letter":
                s.receiver.dead_letter_message(message, reason="test")
            else:
                getattr(s.receiver, f"{kind}_message")(message)
            return kind
        self.both(step)

    @precondition(lambda self: bool(self.ref.held))
    @rule(data=st.data())
    def renew(self, data: st.DataObject) -> None:
        seq = data.draw(st.sampled_from(sorted(self.ref.held)))
        self.both(lambda s: s.receiver.renew_message_lock(s.held[seq]) is not None)

    @rule(data=st.data())
    def receive_deferred(self, data: st.DataObject) -> None:
        deferred = [m[0] for m in self.ref.seen()[0] if m[2] == "DEFERRED"]
        if not deferred:
            return
        seq = data.draw(st.sampled_from(deferred))

        def step(s: Side) -> Any:
            got = s.receiver.receive_deferred_messages([seq])
            return s.hold(got)
        self.both(step)

    @precondition(lambda self: bool(self.ref.held))
    @rule(data=st.data(), kind=st.sampled_from(KINDS))
    def transaction(self, data: st.DataObject, kind: str) -> None:
        """A settlement and a send in one transaction (S12.1): one commit on both."""
        seq = data.draw(st.sampled_from(sorted(self.ref.held)))
        body = f"m{self.sent}"
        self.sent += 1

        def step(s: Side) -> Any:
            message = s.held.pop(seq)
            with s.client.transaction() as tx:
                if kind == "dead_letter":
                    tx.dead_letter_message(s.receiver, message, reason="test")
                else:
                    getattr(tx, f"{kind}_message")(s.receiver, message)
                tx.send_messages(s.sender, ServiceBusMessage(body))
            return kind
        self.both(step)

    @rule(session=st.sampled_from(["a", "b"]), count=st.integers(1, 3))
    def send_to_session(self, session: str, count: int) -> None:
        bodies = [f"{session}{self.sent + i}" for i in range(count)]
        self.sent += count
        self.both(lambda s: s.session_sender.send_messages(
            [ServiceBusMessage(b, session_id=session) for b in bodies]))

    @rule(session=st.sampled_from(["a", "b"]), count=st.integers(1, 3),
          completes=st.booleans())
    def receive_session(self, session: str, count: int, completes: bool) -> None:
        """Lock a session (S10.2), receive in order, complete or abandon what came, set
        its state, release it."""
        def step(s: Side) -> Any:
            with s.client.get_queue_receiver("s", session_id=session,
                                            max_wait_time=WAIT) as receiver:
                got = receiver.receive_messages(count, max_wait_time=WAIT)
                for m in got:
                    (receiver.complete_message if completes else receiver.abandon_message)(m)
                assert receiver.session is not None
                before = receiver.session.get_state()
                receiver.session.set_state(f"{len(got)}")
                return _handed(got), before
        self.both(step)

    @rule(minutes=st.sampled_from([1, 3, 6]))
    def time_passes(self, minutes: int) -> None:
        clock.advance(timedelta(minutes=minutes))  # one clock: both sides at once

    @invariant()
    def readers_agree(self) -> None:
        ref, sub = self.ref.seen(), self.sub.seen()
        assert sub == ref, f"after step {self.steps}: reference {ref!r}, subject {sub!r}"

    def teardown(self) -> None:
        self.ref.close()
        self.sub.close()
        clock.reset()


@pytest.mark.parametrize("variant", ["spark", "mixed"])
def test_issue_43_both_executors_agree_on_random_steps(variant: str, spark: Any,
                                                      tmp_path: Any) -> None:
    """The subject on the Spark executor, or alternating executors step by step on one
    namespace ("mixed"), sees what the local reference sees after every step."""
    machine = type(f"Differential_{variant}", (Differential,), {
        "spark": spark, "base": str(tmp_path),
        "subject_executors": staticmethod(
            (lambda n: "spark") if variant == "spark"
            else (lambda n: "spark" if n % 2 else "local"))})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=int(os.environ.get("SBQUEUE_DIFFERENTIAL_EXAMPLES", "2")),
        stateful_step_count=8, deadline=None, derandomize=True,
        phases=[Phase.explicit, Phase.generate],  # a failure is reported unshrunk: bounded time
        suppress_health_check=list(HealthCheck)))
