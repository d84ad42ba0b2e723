"""The chaos soak's invariant checker (issue 21 point 1, issue 42): the histories of every
process (``soak_history``), what the runner saw, the entities' final state and the final
drain, against the rules a Service Bus user relies on. Pure: no Spark; the runner reads
the tables and passes plain rows.

A lock is *certainly held* from the moment its receive returned (``at``) until the
earliest of its ``until``, the start of the first settlement or transaction that named its
token, and (for renewals) the renewed ``until``. Two locks of one message certainly held
at the same instant are a violation; so is a receive that started after the message's
completion returned. Times carry a ``margin`` for the reads of one shared clock.

Each check has a reference of its own, not the implementation's: where every message must
end (``soak_check_end``: the histories and the final drain by the clients), the roles'
progress (``soak_check_roles``), and a sequence number's partition as the SDK documents
it (its top 16 bits), not the engine's decoding.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from itertools import pairwise

from soak_check_end import drained_counts, whereabouts
from soak_check_roles import roles, tally
from soak_facts import INVARIANTS, Counted, Report, Rules, Stored, chain, completed, sent
from soak_history import Event

__all__ = ["INVARIANTS", "Counted", "Report", "Rules", "Stored", "chain", "check"]

# The SDK documents a partitioned entity's sequence number as carrying the partition in its
# topmost 16 bits (of 64): the checker decodes it so, not with the engine's own function.
PARTITION_SHIFT = 64 - 16



def check(events: Iterable[Event], stored: list[Stored], counted: list[Counted],
          rules: Rules, now: float, findings: Iterable[str] = ()) -> Report:
    """Every invariant of ``INVARIANTS`` over one soak's events, final state and drain.
    ``now``: when the final state was read (times to live); ``findings``: what the runner
    saw outside the histories (tracebacks in standard error)."""
    log = list(events)
    report = Report()
    tally(log, report)
    roles(log, findings, rules, report)
    done = completed(log)
    _locks(log, report, rules.margin)
    _completions(log, done, report, rules.margin)
    whereabouts(log, stored, rules, now, report)
    _duplicates(log, stored, rules.dedupe, report)
    _copies(log, stored, rules.dedupe, report)
    _sessions(log, report, rules.margin)
    _transactions(log, stored, report)
    _numbers(log, stored, rules.dedupe, report)
    _counts(stored, counted, rules.forwarding, report)
    drained_counts(log, counted, report)
    return report


def _releases(log: list[Event]) -> dict[str, float]:
    """Per lock token: when the first settlement or transaction naming it started; for a
    session's messages, also when their holder gave the session back."""
    out: dict[str, float] = {}

    def release(token: str | None, at: float) -> None:
        if token is not None:
            out[token] = min(out.get(token, at), at)

    for e in log:
        if e.ev == "settle" and e.action != "renew":
            release(e.token, e.started)
        elif e.ev == "tx_begin":
            for _, token in e.locks:
                release(token, e.started)
    given_back = sorted((e.started, (e.pid, e.role, e.entity, e.session)) for e in log
                        if e.ev == "session_release")
    for e in log:
        if e.ev == "receive" and e.session is not None:
            holder = (e.pid, e.role, e.entity, e.session)
            at = next((t for t, by in given_back if t >= e.at and by == holder), None)
            if at is not None:
                release(e.token, at)
    return out


def _held(log: list[Event], kind: str) -> dict[tuple[str, str], list[tuple[float, float, str]]]:
    """Per (entity, message or session): the certainly-held intervals of its locks."""
    releases = _releases(log)
    renewed: dict[str, float] = {}
    for e in log:
        if e.ev == "settle" and e.action == "renew" and e.ok and e.token and e.until:
            renewed[e.token] = max(renewed.get(e.token, 0.0), e.until)
    ends = {e.token: e.started for e in log if e.ev == "session_release" and e.token}
    out: dict[tuple[str, str], list[tuple[float, float, str]]] = defaultdict(list)
    for e in log:
        if e.token is None or e.until is None:
            continue
        if kind == "message" and e.ev == "receive" and e.mode == "peek_lock":
            key = (e.entity, str(e.seq))
            end = min(max(e.until, renewed.get(e.token, 0.0)), releases.get(e.token, e.until))
        elif kind == "session" and e.ev == "session_lock" and e.session is not None:
            key = (e.entity, e.session)
            end = min(e.until, ends.get(e.token, e.until))
        else:
            continue
        out[key].append((e.at, end, e.token))
    return out


def _overlaps(report: Report, invariant: str,
              held: dict[tuple[str, str], list[tuple[float, float, str]]], margin: float
              ) -> None:
    for key, spans in held.items():
        spans.sort()
        for i, (_, end, token) in enumerate(spans):
            for other_start, other_end, other in spans[i + 1:]:
                if other_start >= end - margin:
                    break
                if other != token and min(end, other_end) - other_start > margin:
                    report.add(invariant, f"{key}: {token} and {other} both held at "
                                          f"{other_start:.2f}")


def _locks(log: list[Event], report: Report, margin: float) -> None:
    _overlaps(report, "overlapping locks", _held(log, "message"), margin)


def _completions(log: list[Event], completed: dict[tuple[str, int], float], report: Report,
                 margin: float) -> None:
    for e in log:
        if e.ev != "receive" or e.seq is None:
            continue
        at = completed.get((e.entity, int(e.seq)))
        if at is not None and e.started > at + margin:
            report.add("delivered after completion",
                       f"{e.entity} #{e.seq} ({e.id}) received at {e.started:.2f}, "
                       f"completed at {at:.2f}")


def _numbers_of(log: list[Event], stored: list[Stored], counts: Callable[[str, str], bool]
                ) -> dict[tuple[str, str], set[int]]:
    """Per (entity, message id) that ``counts``: the sequence numbers it was received or is
    held at."""
    seqs: dict[tuple[str, str], set[int]] = defaultdict(set)
    for e in log:
        if e.ev == "receive" and e.id is not None and e.seq is not None \
                and counts(e.entity, e.id):
            seqs[(e.entity, e.id)].add(int(e.seq))
    for s in stored:
        if counts(s.entity, s.id):
            seqs[(s.entity, s.id)].add(s.seq)
    return seqs


def _duplicates(log: list[Event], stored: list[Stored], dedupe: frozenset[str],
                report: Report) -> None:
    """One duplicate-detection id is one message: one sequence number."""
    seqs = _numbers_of(log, stored, lambda entity, _: entity in dedupe)
    for (entity, message), numbers in seqs.items():
        if len(numbers) > 1:
            report.add("duplicate delivered twice", f"{entity} {message}: {sorted(numbers)}")


def _copies(log: list[Event], stored: list[Stored], dedupe: frozenset[str],
            report: Report) -> None:
    """An id sent once is one message on each entity it reaches (forwarded, fanned out)."""
    once = Counter(m for e in sent(log) for m in e.ids)
    seqs = _numbers_of(log, stored,
                       lambda entity, message: entity not in dedupe and once[message] == 1)
    for (entity, message), numbers in seqs.items():
        if len(numbers) > 1:
            report.add("copies", f"{entity} {message}: {sorted(numbers)}")


def _sessions(log: list[Event], report: Report, margin: float) -> None:
    firsts: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for e in log:
        if e.ev == "receive" and e.session is not None and e.count == 1 and e.seq is not None:
            firsts[(e.entity, e.session)].append((e.at, int(e.seq)))
    for key, seen in firsts.items():
        seen.sort()
        for (_, before), (at, after) in pairwise(seen):
            if after < before:
                report.add("session order", f"{key}: #{after} first delivered at {at:.2f} "
                                            f"after #{before}")
    _overlaps(report, "session holders", _held(log, "session"), margin)


def _transactions(log: list[Event], stored: list[Stored], report: Report) -> None:
    ended = {e.tx: e for e in log if e.ev == "tx_end" and e.tx is not None}
    seen = {s.id for s in stored} | {e.id for e in log if e.ev == "receive" and e.id}
    kept = {(s.entity, s.seq) for s in stored}
    for begin in (e for e in log if e.ev == "tx_begin" and e.tx):
        end = ended.get(str(begin.tx))
        visible = [m for m in begin.ids if m in seen]
        if end is not None and not end.ok and visible:
            report.add("transaction partial", f"{begin.tx} failed, yet {visible} visible")
        elif end is None and 0 < len(visible) < len(begin.ids):
            report.add("transaction partial", f"{begin.tx}: {len(visible)} of "
                                              f"{len(begin.ids)} sends visible")
        elif end is None and visible and any((begin.entity, s) in kept for s, _ in begin.locks):
            report.add("transaction partial", f"{begin.tx}: sends visible, a complete not")


def _numbers(log: list[Event], stored: list[Stored], dedupe: frozenset[str],
             report: Report) -> None:
    """Each number once and in its partition (the view's ``partition_id`` against the SDK's
    layout); per partition of an entity, a message whose send returned before another's
    began has the lower number (S3.1: numbers follow the order sends commit in); and one
    partition key, one partition of an entity (S3.2)."""
    twice = Counter((s.entity, s.seq) for s in stored)
    for (entity, seq), n in twice.items():
        if n > 1:
            report.add("numbers", f"{entity} #{seq} held {n} times")
    for s in stored:
        if _partition(s.seq) != s.partition:
            report.add("numbers", f"{s.entity} #{s.seq} in partition {s.partition}")
    sends = {(e.entity, m): e for e in sent(log) if e.entity not in dedupe for m in e.ids}
    seqs = _numbers_of(log, stored, lambda entity, message: (entity, message) in sends)
    lines: dict[tuple[str, int], list[tuple[Event, int, str]]] = defaultdict(list)
    for (entity, message), numbers in seqs.items():
        for seq in numbers:
            lines[(entity, _partition(seq))].append((sends[(entity, message)], seq, message))
    for (entity, _), items in lines.items():
        _rising(entity, items, report)
    keyed: dict[tuple[str, str], set[int]] = defaultdict(set)
    for e in log:
        if e.ev == "receive" and e.key is not None and e.seq is not None:
            keyed[(e.entity, e.key)].add(_partition(int(e.seq)))
    for (entity, key), partitions in keyed.items():
        if len(partitions) > 1:
            report.add("numbers", f"{entity}: key {key!r} in partitions {sorted(partitions)}")


def _partition(seq: int) -> int:
    return seq >> PARTITION_SHIFT


def _rising(entity: str, items: list[tuple[Event, int, str]], report: Report) -> None:
    """In one partition: no message numbered below one whose send returned before its own
    send began."""
    done = sorted(items, key=lambda i: i[0].at)
    k, highest = 0, (-1, "")
    for send, seq, message in sorted(items, key=lambda i: i[0].started):
        while k < len(done) and done[k][0].at < send.started:
            highest = max(highest, (done[k][1], done[k][2]))
            k += 1
        if highest[0] > seq:
            report.add("numbers", f"{entity} {message} #{seq} below {highest[1]} "
                                  f"#{highest[0]}, sent before it")


def _counts(stored: list[Stored], counted: list[Counted], forwarding: frozenset[str],
            report: Report) -> None:
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    for s in stored:
        kind = {"DeadLetter": "dead_letter", "TransferDeadLetter": "transfer_dead_letter",
                "Transfer": "transfer"}.get(s.sub_queue)
        if kind is None:
            kind = "scheduled" if s.state == "Scheduled" else (
                "transfer" if s.entity in forwarding else "active")
        tally[s.entity][kind] += 1
    for c in counted:
        mine = tally[c.entity]
        told = {"active": c.active, "scheduled": c.scheduled, "dead_letter": c.dead_letter,
                "transfer_dead_letter": c.transfer_dead_letter, "transfer": c.transfer}
        held = {k: mine[k] for k in told}
        if told != held or c.total != sum(told.values()):
            report.add("counts", f"{c.entity}: runtime {told} (total {c.total}), held {held}")
