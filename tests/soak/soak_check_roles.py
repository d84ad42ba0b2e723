"""The chaos soak's checks of the roles themselves (issue 42 point 1): a role's unexpected
exception, a process that died by itself or printed a traceback, a call that began and
never ended in a process that lived on, and a role that went a stall window without a
successful operation in one life of its process. Also what each role did (its work).

A role's successful operations are its events that say something returned: a send, a
receive, a settlement or transaction that returned ok, a step (a forward, a maintenance, a
loop turn whose receive found nothing), a session taken or given back. Failed calls and
begin events are attempts, not progress."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import pairwise
from signal import SIGTERM

from soak_facts import FINAL, RUNNER, Report, Rules, committed, interrupted, sent, unended
from soak_history import Event

__all__ = ["progress", "roles", "tally"]

NOT_PROGRESS = ("start", "crash")
# A stopped process's exit codes: 0, or SIGTERM's when it was asked to stop while still
# starting (before it could take the signal as a request)
STOPPED = (0, -SIGTERM)


def tally(log: list[Event], report: Report) -> None:
    """Per role: messages sent, received, completed, forwarded; entities maintained;
    errors (calls refused or failed)."""
    for e in sent(log):
        report.did(e.role, "sent", len(e.ids))
    done = committed(log)
    for e in log:
        if e.ev == "receive":
            report.did(e.role, "received")
            if e.mode == "receive_and_delete":
                report.did(e.role, "completed")
        elif e.ev == "settle" and e.action == "complete" and e.ok:
            report.did(e.role, "completed")
        elif e.ev == "tx_begin" and e.tx in done:
            report.did(e.role, "completed", len(e.locks))
        elif e.ev == "step" and e.ok and e.moved:
            report.did(e.role, "maintained" if e.role.startswith("maintainer") else
                       "forwarded", e.moved)
        if not e.ok and e.role != RUNNER:
            report.did(e.role, "errors")


def roles(log: list[Event], findings: Iterable[str], rules: Rules, report: Report) -> None:
    """``crashed`` and ``stalled``. ``findings``: what the runner saw outside the histories
    (a traceback in a process's standard error)."""
    for finding in findings:
        report.add("crashed", finding)
    for e in log:
        if e.ev == "crash":
            report.add("crashed", f"{e.role} (pid {e.pid}) at {e.at:.2f}: {e.error}")
        elif e.ev == "exit":
            report.add("crashed", f"process {e.process} (pid {e.pid}) ended by itself, "
                                  f"code {e.code}, at {e.at:.2f}")
        elif e.ev == "stop" and e.ok and e.code not in STOPPED:
            report.add("crashed", f"process {e.process} (pid {e.pid}) stopped with code "
                                  f"{e.code}")
        elif e.ev == "stop" and not e.ok:
            report.add("stalled", f"process {e.process} (pid {e.pid}) did not stop when "
                                  "asked: killed")
    cut = {id(e) for e in interrupted(log)}
    for e in unended(log):
        if id(e) not in cut:
            report.add("crashed", f"{e.role} (pid {e.pid}): {e.ev} {e.action or ''} "
                                  f"#{e.seq} at {e.started:.2f} never ended")
    _stalls(log, rules, report)


def _stalls(log: list[Event], rules: Rules, report: Report) -> None:
    """In each life of each process (spawn to kill, death, or the request to stop), each
    of its roles: started within ``rules.boot`` of the spawn, then no ``rules.stall``
    seconds without a successful operation (from its start, between operations, to the
    life's end)."""
    ends: dict[int, float] = {}  # a life ends at its kill or death, or when asked to stop
    for e in log:
        if e.role == RUNNER and e.ev in ("kill", "exit", "term", "stop"):
            ends[e.pid] = min(ends.get(e.pid, e.at), e.at)
    done: dict[tuple[int, str], list[float]] = defaultdict(list)
    starts: dict[tuple[int, str], float] = {}
    for e in log:
        if e.ev == "start":
            starts[(e.pid, e.role)] = e.at
        elif progress(e):
            done[(e.pid, e.role)].append(e.at)
    for spawn in (e for e in log if e.role == RUNNER and e.ev == "spawn"):
        end = ends.get(spawn.pid)
        if end is None:
            continue  # the runner itself ended early: nothing to judge
        for role in spawn.ids:
            began = starts.get((spawn.pid, role))
            if began is None:
                if end - spawn.at > rules.boot:
                    report.add("stalled", f"{role} in {spawn.process} (pid {spawn.pid}) "
                                          f"never started in {end - spawn.at:.0f} s")
                continue
            times = [began, *sorted(done[(spawn.pid, role)]), end]
            gap, at = max((b - a, a) for a, b in pairwise(times))
            if gap > rules.stall:
                report.add("stalled", f"{role} in {spawn.process} (pid {spawn.pid}): no "
                                      f"successful operation for {gap:.0f} s from {at:.2f}")


def progress(e: Event) -> bool:
    """Whether ``e`` says a role's call returned (progress, not an attempt)."""
    return (e.ok and e.ev not in NOT_PROGRESS and not e.ev.endswith("_begin")
            and e.role not in (RUNNER, FINAL))
