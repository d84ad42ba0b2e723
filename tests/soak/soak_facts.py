"""What the chaos soak's checker works on: the final state's rows, the rules of the
topology, the report, and the facts the histories establish (which sends count, which
messages were completed, which calls a kill cut short). Pure: no Spark."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from soak_history import Event

__all__ = ["FINAL", "INVARIANTS", "RUNNER", "Counted", "Report", "Rules", "Stored", "chain",
           "completed", "drain_ran", "ids_of", "interrupted", "killed", "sent"]

INVARIANTS = (
    "crashed",  # a role raised what it should not, a process died or printed a traceback
    "stalled",  # a role went a stall window without one successful operation
    "lost",  # a message whose send returned is nowhere: not completed, drained or held
    "stranded",  # held at the end, yet the final drain could not take it
    "misplaced",  # came out of an entity or sub-queue its route does not allow
    "overlapping locks",  # one message, two holders certainly holding it at once
    "delivered after completion",
    "duplicate delivered twice",  # one duplicate-detection id, two sequence numbers
    "session order",  # a session's first deliveries out of sequence order
    "session holders",  # one session, two holders at once
    "transaction partial",  # some of a transaction's operations visible, not all
    "copies",  # one message (one copy of a fan-out) at two sequence numbers of one path
    "numbers",  # a number twice, outside its partition, below an earlier send's; a key in two
    "counts",  # the runtime counts differ from the messages held, or from those drained
)
RUNNER = "runner"  # the role name of the runner's own events (spawn, kill, exit, stop)
FINAL = "final-drain"  # the role name of the final drain's events

Routes = Callable[[Event], list[tuple[str, ...]]]
# Per copy of a send (as Routes): the (entity, sub-queue) pairs it may come out of at the
# end; the flag says whether it is dead (expired or dead-lettered; None: maybe)
Places = Callable[[Event, bool | None], list[frozenset[tuple[str, str]]]]


@dataclass(frozen=True)
class Stored:
    """One message of an entity's final state (its SQL view)."""

    entity: str
    id: str
    seq: int
    partition: int
    sub_queue: str  # Main, DeadLetter, TransferDeadLetter, Transfer
    state: str  # Active, Deferred, Scheduled


@dataclass(frozen=True)
class Counted:
    """An entity's runtime counts (S16.2) as read at the end."""

    entity: str
    active: int
    scheduled: int
    dead_letter: int
    transfer_dead_letter: int
    transfer: int
    total: int


@dataclass(frozen=True)
class Rules:
    """What the checker must know of the topology and the run."""

    routes: Routes  # where each copy of a send may be on its way (``chain``)
    dedupe: frozenset[str] = frozenset()  # the entities that detect duplicates
    forwarding: frozenset[str] = frozenset()  # their main queue counts as transfer (S13.2)
    places: Places | None = None  # where a copy may come out of the final drain
    stall: float = 300.0  # seconds a started role may go without a successful operation
    boot: float = 240.0  # seconds a process may take before its roles start
    margin: float = 0.25  # seconds of slack between reads of the one shared clock


@dataclass
class Report:
    """Violations by invariant (each with a few examples) and, by role, what it did:
    messages sent, received, completed (a complete that returned, a committed transaction's,
    a receive-and-delete), forwarded; entities maintained; errors (refusals)."""

    violations: dict[str, list[str]] = field(
        default_factory=lambda: {name: [] for name in INVARIANTS})
    work: dict[str, Counter[str]] = field(default_factory=dict)
    # Messages not found that an interrupted receive-and-delete may have taken (at most
    # what those calls asked for, on their entities): not counted as lost.
    unattributed: int = 0

    def add(self, invariant: str, example: str) -> None:
        self.violations[invariant].append(example)

    def did(self, role: str, kind: str, n: int = 1) -> None:
        self.work.setdefault(role, Counter())[kind] += n

    @property
    def clean(self) -> bool:
        return not any(self.violations.values())


def chain(entity: str, forwards: dict[str, str]) -> tuple[str, ...]:
    """``entity`` and every entity it forwards to, in turn (a message may be in any)."""
    path = [entity]
    while path[-1] in forwards and forwards[path[-1]] not in path:
        path.append(forwards[path[-1]])
    return tuple(path)


def committed(log: list[Event]) -> dict[str, float]:
    """Transactions whose commit returned, and when."""
    return {str(e.tx): e.at for e in log if e.ev == "tx_end" and e.ok and e.tx}


def sent(log: list[Event]) -> list[Event]:
    """Sends that must not be lost: outside a transaction, or in one that committed."""
    done = committed(log)
    return [e for e in log if e.ev == "send" and e.ok and (e.tx is None or e.tx in done)]


def ids_of(log: list[Event]) -> dict[tuple[str, int], str]:
    """The message id of each (entity, sequence number) a receive named."""
    return {(e.entity, int(e.seq)): str(e.id) for e in log
            if e.ev == "receive" and e.seq is not None and e.id is not None}


def completed(log: list[Event]) -> dict[tuple[str, int], float]:
    """Per (entity, sequence number): when its completion first returned (a complete, a
    receive-and-delete, a committed transaction's complete)."""
    out: dict[tuple[str, int], float] = {}
    done = committed(log)

    def finish(entity: str, seq: int | None, at: float) -> None:
        if seq is not None:
            key = (entity, int(seq))
            out[key] = min(out.get(key, at), at)

    for e in log:
        taken = e.ev == "receive" and e.mode == "receive_and_delete"
        if taken or (e.ev == "settle" and e.action == "complete" and e.ok):
            finish(e.entity, e.seq, e.at)
        elif e.ev == "tx_begin" and e.tx in done:
            for seq, _ in e.locks:
                finish(e.entity, seq, done[str(e.tx)])
    return out


def killed(log: list[Event]) -> set[int] | None:
    """The processes that ended without finishing their calls: killed by the chaos, killed
    at the stop, or dead by themselves. None: no runner events (a hand-made history), any
    process may have been."""
    runner = [e for e in log if e.role == RUNNER]
    if not runner:
        return None
    return {e.pid for e in runner
            if e.ev in ("kill", "exit") or (e.ev == "stop" and not e.ok)}


def unended(log: list[Event]) -> list[Event]:
    """Begin events with no end event of their call (and, for a settlement, of their
    sequence number: one DataFrame complete settles many under one call id)."""
    ended = {(e.call, e.seq) for e in log if e.call is not None and not e.ev.endswith("_begin")}
    return [e for e in log if e.ev.endswith("_begin") and e.call is not None
            and (e.call, e.seq) not in ended]


def interrupted(log: list[Event]) -> list[Event]:
    """The begins of calls a kill cut short: no end, nothing after them from their role in
    that process but events of the same call, and that process was killed. Such a call
    may have taken effect; a call that failed in a process that lived on (its role went on,
    or wrote a crash) may not."""
    dead = killed(log)
    # per (pid, role): the positions of its last events, those of one call
    tail: dict[tuple[int, str], tuple[str | None, list[int]]] = {}
    for i, e in enumerate(log):
        call, members = tail.get((e.pid, e.role), (None, []))
        if e.call is not None and e.call == call:
            members.append(i)
        else:
            members = [i]
        tail[(e.pid, e.role)] = (e.call, members)
    last = {i for _, members in tail.values() for i in members}
    position = {id(e): i for i, e in enumerate(log)}
    return [e for e in unended(log) if (dead is None or e.pid in dead)
            and position[id(e)] in last]


def drain_ran(log: list[Event]) -> bool:
    """Whether the histories hold a final drain (whose end is its ``drained`` event)."""
    return any(e.ev == "drained" and e.role == FINAL for e in log)
