"""The chaos soak's checks of where every message ended (issue 42 points 3 to 5): each
message a send returned with is completed, or comes out of the final drain from a place
its route allows, once; what the entities held at the end comes out of the drain; the
runtime counts equal what the drain took out of each entity.

Where the histories hold no final drain (hand-made ones), "where it ended" is the final
state's rows instead of the drain's deliveries."""

from __future__ import annotations

from collections import Counter, defaultdict

from soak_facts import (
    FINAL,
    Counted,
    Report,
    Rules,
    Stored,
    completed,
    drain_ran,
    ids_of,
    interrupted,
    sent,
)
from soak_history import Event

__all__ = ["drained_counts", "whereabouts"]

Place = tuple[str, str]  # (entity, sub-queue)
SUB_QUEUES = ("Main", "DeadLetter", "TransferDeadLetter")


def _place(entity: str, sub_queue: str | None) -> Place:
    """A transfer-lane row (a forward in progress) is still in its entity's main queue."""
    return (entity, "Main" if sub_queue in (None, "Transfer") else sub_queue)


def _gone(log: list[Event]) -> set[tuple[str, str]]:
    """(entity, message id) completed, or maybe completed by a call a kill cut short."""
    ids = ids_of(log)
    maybe = set(completed(log))
    for e in interrupted(log):
        if e.ev == "settle_begin" and e.action == "complete" and e.seq is not None:
            maybe.add((e.entity, int(e.seq)))
        elif e.ev == "tx_begin":
            maybe.update((e.entity, int(s)) for s, _ in e.locks)
    return {(entity, ids[(entity, seq)]) for entity, seq in maybe if (entity, seq) in ids}


def _dead(log: list[Event]) -> tuple[set[str], set[str]]:
    """Message ids dead-lettered by a settlement that returned, and by one a kill cut
    short (maybe)."""
    ids = ids_of(log)
    sure = {ids.get((e.entity, int(e.seq)), "") for e in log if e.ev == "settle"
            and e.action == "dead_letter" and e.ok and e.seq is not None}
    maybe = {ids.get((e.entity, int(e.seq)), "") for e in interrupted(log)
             if e.ev == "settle_begin" and e.action == "dead_letter" and e.seq is not None}
    return sure, maybe


def _takings(log: list[Event]) -> Counter[str]:
    """Per entity: how many messages interrupted receive-and-deletes may have taken
    unrecorded (asked for, less those they recorded before the kill)."""
    seen = Counter(str(e.call) for e in log if e.ev == "receive" and e.call is not None)
    taken: Counter[str] = Counter()
    for e in interrupted(log):
        if e.ev == "receive_begin" and e.mode == "receive_and_delete":
            taken[e.entity] += max(0, e.count - seen[str(e.call)])
    return taken


def _found(log: list[Event], stored: list[Stored]) -> dict[str, list[Place]]:
    """Per message id: where it ended (the drain's deliveries, else the final rows)."""
    found: dict[str, list[Place]] = defaultdict(list)
    if drain_ran(log):
        for e in log:
            if e.role == FINAL and e.ev == "receive" and e.id is not None:
                found[e.id].append(_place(e.entity, e.sub_queue))
    else:
        for s in stored:
            found[s.id].append(_place(s.entity, s.sub_queue))
    return found


def whereabouts(log: list[Event], stored: list[Stored], rules: Rules, now: float,
                report: Report) -> None:
    """``lost``, ``stranded`` and ``misplaced``. ``now``: when the final state was read
    (a time to live that ran out before it made its message dead)."""
    gone, found, taken = _gone(log), _found(log, stored), _takings(log)
    held = {(s.entity, s.id) for s in stored}
    dead, maybe_dead = _dead(log)
    first: dict[str, Event] = {}
    for send in sent(log):
        for message in send.ids:
            first.setdefault(message, send)
    for message, send in first.items():
        expired = send.ttl is not None and send.at + send.ttl < now
        is_dead = True if expired or message in dead else (
            None if message in maybe_dead else False)
        routes = rules.routes(send)
        allowed = rules.places(send, is_dead) if rules.places else [None] * len(routes)
        left = list(found.get(message, []))
        for route, ok in zip(routes, allowed, strict=True):
            mine = [p for p in left if p[0] in route]
            for p in mine:
                left.remove(p)
                if ok is not None and p not in ok:
                    report.add("misplaced", f"{message} ({'dead' if is_dead else 'live'}) "
                                            f"came out of {p[0]} {p[1]}; allowed: "
                                            f"{sorted(ok)}")
            if mine or any((entity, message) in gone or (entity, message) in held
                           for entity in route):
                continue  # ended on its route; held and not drained: stranded, below
            spare = next((entity for entity in route if taken[entity] > 0), None)
            if spare is not None:
                taken[spare] -= 1
                report.unattributed += 1
            elif not left:
                report.add("lost", f"{message} sent to {send.entity} at {send.at:.2f} by "
                                   f"{send.role}: nowhere on {' -> '.join(route)}")
        for entity, sub_queue in left:
            report.add("misplaced", f"{message} came out of {entity} {sub_queue}, off its "
                                    f"routes {routes}")
    _strangers(log, found, set(first), report)
    if drain_ran(log):
        _stranded(log, stored, report)


def _strangers(log: list[Event], found: dict[str, list[Place]], known: set[str],
               report: Report) -> None:
    """Messages that came out though no send call named them (a send cut short by a kill,
    or one that failed, still names them)."""
    named = known | {m for e in log if e.ev in ("send_begin", "send", "tx_begin")
                     for m in e.ids}
    for message, where in found.items():
        if message not in named:
            report.add("misplaced", f"{message} came out of {where}: no send named it")


def _stranded(log: list[Event], stored: list[Stored], report: Report) -> None:
    """Every message held at the end comes out of the drain (from its entity)."""
    drained = {(e.entity, e.id) for e in log if e.role == FINAL and e.ev == "receive"}
    for s in stored:
        if (s.entity, s.id) not in drained:
            report.add("stranded", f"{s.entity} #{s.seq} ({s.id}, {s.sub_queue} "
                                   f"{s.state}) held at the end, never drained")


def drained_counts(log: list[Event], counted: list[Counted], report: Report) -> None:
    """The runtime counts, read before the drain, against what the drain took out of each
    entity: as many messages in all, and out of no sub-queue more than it was counted to
    hold, but for the dead-letter queue (a receive moves an expired message, or one past
    its maximum delivery count, there instead of handing it out: S8.2, decision 010's
    expiry of a partition's head only)."""
    if not drain_ran(log):
        return
    got = Counter(_place(e.entity, e.sub_queue) for e in log
                  if e.role == FINAL and e.ev == "receive")
    for c in counted:
        told = dict(zip(SUB_QUEUES, (c.active + c.scheduled + c.transfer, c.dead_letter,
                                     c.transfer_dead_letter), strict=True))
        took = {q: got[(c.entity, q)] for q in SUB_QUEUES}
        if sum(told.values()) != sum(took.values()) or any(
                took[q] > told[q] for q in SUB_QUEUES if q != "DeadLetter"):
            report.add("counts", f"{c.entity}: runtime {told}, drained {took}")
