"""The chaos soak (issue 21 point 1, issue 42), one command:

    python tests/soak/soak.py --minutes 60 [--root DIR] [--kill-every 30] [--seed 1]
        [--stall 120] [--fault NAME ...]

Creates the soak's entities (``soak_topology``) on a new local namespace, starts four
processes that run the roles (``soak_roles``, a thread per role), and for ``--minutes`` a
chaos thread sends SIGKILL to a random process every ``--kill-every`` seconds on average
and starts it again (and starts again, as a violation, one that ended by itself). Then
every process is stopped, the jobs finish what they owe, the final state is read and the
clients drain every entity (``soak_final``), and ``soak_check`` judges the histories (the
roles', the runner's own, the drain's) and each process's standard error against it.
Prints one table (per role: messages sent, received, completed, forwarded, entities
maintained, errors, kills of its process; each invariant with its violations) and exits 1
on any violation. ``--fault`` (``soak_faults``) breaks a promise on purpose, for the tests
that show the checker names it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import soak_faults  # noqa: E402
from soak_check import INVARIANTS, Report, Rules, check  # noqa: E402
from soak_check_roles import progress  # noqa: E402
from soak_facts import RUNNER  # noqa: E402
from soak_final import drain, final_state, settle_down  # noqa: E402
from soak_history import History, read_histories  # noqa: E402
from soak_topology import DEDUPE, FORWARDS, create, places, routes  # noqa: E402

# The roles, by the process that runs them (each role a thread of it, each process one JVM:
# on two cores, a JVM per role spent the run starting JVMs). A kill takes a process down
# with every role in it, in the middle of whatever each was doing.
PROCESSES = {
    "producers": ("sender", "sender#2", "frame-sender"),
    "consumers": ("receiver", "receiver#2", "taker", "drain", "transaction"),
    "sessions": ("session-worker", "session-worker#2"),
    "jobs": ("forwarder", "maintainer"),
}
# Seconds a stopped process may take to end its turns (the stall window where longer: an
# operation in hand may take that long)
STOP_GRACE = 120.0
# A process is killed only once each of its roles has done something and it has run this
# long: a JVM takes 20-40 s to start on two busy cores (minutes on an overloaded one), and
# a kill during the start tests nothing but the start.
MIN_AGE = 60.0
BOOT_WAIT = 600.0  # seconds the chaos waits for the first processes' roles to start


@dataclass
class Fleet:
    """The role processes, their incarnations and the kills they took; each start, kill,
    death and stop written to the runner's history."""

    root: str
    logs: Path
    seed: int
    faults: list[str] = field(default_factory=list)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    starts: Counter[str] = field(default_factory=Counter)
    born: dict[str, float] = field(default_factory=dict)
    kills: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    history: History | None = None
    grace: float = STOP_GRACE

    def __post_init__(self) -> None:
        self.history = History(self.logs / f"{RUNNER}-0.jsonl", RUNNER)

    def note(self, ev: str, process: str, **fields: object) -> None:
        assert self.history is not None
        self.history.write(ev, process=process, pid=self.procs[process].pid, at=time.time(),
                           **fields)

    def start(self, process: str) -> None:
        self.starts[process] += 1
        n = self.starts[process]
        env = {**os.environ, "SBQUEUE_SPARK_MASTER": "local[2]",
               "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path]),
               soak_faults.ENV: ",".join(f for f in self.faults
                                         if f not in soak_faults.RUNNER_FAULTS)}
        self.born[process] = time.monotonic()
        err = (self.logs / f"{process}-{n}.err").open("wb")
        self.procs[process] = subprocess.Popen(
            [sys.executable, str(HERE / "soak_roles.py"), ",".join(PROCESSES[process]),
             self.root, str(self.logs), str(n), str(self.seed * 1000 + n)],
            env=env, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
        self.note("spawn", process, ids=PROCESSES[process])

    def _histories(self, process: str) -> list[Path]:
        n = self.starts[process]
        return [self.logs / f"{role.replace('#', '_')}-{n}.jsonl" for role in PROCESSES[process]]

    def running(self, process: str) -> bool:
        """Whether the current incarnation's roles have started (its Spark is up)."""
        return all(path.exists() for path in self._histories(process))

    def progressed(self, process: str) -> bool:
        """Whether each of the current incarnation's roles has done something that
        returned: only then may a kill end this life (every life between kills shows
        every role's progress; a role that never gets there is a stall)."""
        return self.running(process) and all(
            any(progress(e) for e in read_histories([path]))
            for path in self._histories(process))

    def wait_running(self, limit: float) -> None:
        """Until every process's roles have started (or ``limit`` seconds): the chaos's
        minutes are minutes of work, however long the JVMs take to start."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and not all(map(self.running, PROCESSES)):
            time.sleep(1.0)
            self.revive()

    def kill_one(self, rng: random.Random) -> None:
        with self.lock:
            grown = [p for p in sorted(self.procs) if self.progressed(p)
                     and time.monotonic() - self.born[p] >= MIN_AGE]
            if not grown:
                return
            process = rng.choice(grown)
            self.procs[process].send_signal(signal.SIGKILL)
            self.procs[process].wait()
            self.note("kill", process)
            self.kills[process] += 1
            self.start(process)

    def revive(self) -> None:
        """A process that ended by itself (none should): noted, and started again."""
        with self.lock:
            for process, proc in sorted(self.procs.items()):
                if proc.poll() is not None:
                    self.note("exit", process, code=proc.returncode, ok=False)
                    self.start(process)

    def stop(self) -> None:
        with self.lock:
            for process, proc in self.procs.items():
                self.note("term", process)  # asked to stop: its roles end their turns
                proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + self.grace
            for process, proc in self.procs.items():
                try:
                    proc.wait(max(1.0, deadline - time.monotonic()))
                    self.note("stop", process, code=proc.returncode)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    self.note("stop", process, code=proc.returncode, ok=False)


def chaos(fleet: Fleet, until: float, every: float, rng: random.Random) -> None:
    """Until ``until``: a kill every ``every`` seconds on average; a look every second for a
    process that ended by itself."""
    while time.monotonic() < until:
        wake = time.monotonic() + rng.uniform(0.5 * every, 1.5 * every)
        while time.monotonic() < min(wake, until):
            time.sleep(min(1.0, max(0.0, min(wake, until) - time.monotonic())))
            fleet.revive()
        if time.monotonic() < until:
            fleet.kill_one(rng)


TRACEBACK = re.compile(r"^Traceback \(most recent call last\):\n(?:[ \t].*\n|\n)*(.+)$",
                       re.M)


def tracebacks(logs: Path) -> list[str]:
    """A Python traceback in a role process's standard error (a thread died, the process
    failed) names its file and its last line."""
    found = []
    for path in sorted(logs.glob("*.err")):
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{path.name}: {m[1].strip()}"[:500] for m in TRACEBACK.finditer(text)]
    return found


def table(report: Report, fleet: Fleet) -> str:
    kinds = ("sent", "received", "completed", "forwarded", "maintained", "errors")
    lines = [f"{'role':<18} {'process':<10} " + " ".join(f"{k:>10}" for k in kinds)
             + f" {'kills':>6}"]
    for process, roles in PROCESSES.items():
        for role in roles:
            work = report.work.get(role, Counter())
            lines.append(f"{role:<18} {process:<10} "
                         + " ".join(f"{work[k]:>10}" for k in kinds)
                         + f" {fleet.kills[process]:>6}")
    lines.append("")
    lines.append(f"{'invariant':<30} {'violations':>10}")
    for name in INVARIANTS:
        lines.append(f"{name:<30} {len(report.violations[name]):>10}")
    lines.append(f"{'(unattributed: taken by a killed receive-and-delete)':<30} "
                 f"{report.unattributed:>4}")
    for name in INVARIANTS:
        for example in report.violations[name][:5]:
            lines.append(f"  {name}: {example}")
    return "\n".join(lines)


def seed(root: str, logs: Path, seed: int) -> None:
    """Messages waiting before any process starts: on a slow machine the senders may send
    little in a short run, and the session workers, the forwarder, the taker and the
    DataFrame drain would have nothing to do."""
    from soak_roles import Role, send_one, send_session, send_topic
    from soak_topology import chain_start

    role = Role("seed", root, logs / "seed-0.jsonl", seed)
    for session in ("s0", "s1", "s2"):
        send_session(role, session)
    for _ in range(3):
        send_one(role, chain_start(), role.new_id())
    for n in (0, 2, 4, 1):
        send_topic(role, n)
    role.history.close()


def start_faults(root: str, logs: Path, faults: list[str], seed: int) -> threading.Thread:
    """The runner's faults during the chaos (``soak_faults.runner_faults``)."""
    from soak_roles import Role

    def run() -> None:
        role = Role("fault", root, logs / "fault-0.jsonl", seed)
        try:
            soak_faults.runner_faults(role, faults)
        except Exception as exc:  # a fault that could not be put in fails its test
            soak_faults.note(logs, "failed", error=f"{type(exc).__name__}: {exc}")
        role.history.close()

    thread = threading.Thread(target=run, name="faults", daemon=True)
    thread.start()
    return thread


def histories_of(root: str) -> Path:
    """Where the histories go: in the namespace folder, or beside it in a temporary folder
    for a namespace on S3."""
    if "://" not in root:
        return Path(root) / "histories"
    return Path(tempfile.gettempdir()) / f"sbqueue-soak-{re.sub(r'[^A-Za-z0-9]+', '-', root)}"


def soak(minutes: float, root: str, every: float, seed_: int, faults: list[str],
         rules: Rules) -> tuple[Report, Fleet]:
    from sbqueue.management import ServiceBusAdministrationClient

    create(ServiceBusAdministrationClient(root))
    logs = histories_of(root)
    logs.mkdir(parents=True, exist_ok=True)
    seed(root, logs, seed_)
    fleet = Fleet(root, logs, seed_, faults, grace=max(STOP_GRACE, rules.stall))
    for process in PROCESSES:
        fleet.start(process)
    fleet.wait_running(BOOT_WAIT)
    injected = start_faults(root, logs, faults, seed_)
    until = time.monotonic() + minutes * 60
    chaos(fleet, until, every, random.Random(seed_))
    injected.join()
    fleet.stop()
    events = list(read_histories(sorted(logs.glob("*.jsonl"))))
    locks = [e.until for e in events if e.until is not None]
    settle_down(root, time.time(), max(locks, default=0.0))
    hold = soak_faults.after_run(root, logs, faults)
    stored, counted = final_state(root)
    now = time.time()
    drain(root, logs, hold)
    report = check(read_histories(sorted(logs.glob("*.jsonl"))), stored, counted, rules, now,
                   tracebacks(logs))
    return report, fleet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--root", default=None, help="namespace folder (default: a new one)")
    parser.add_argument("--kill-every", type=float, default=30.0,
                        help="seconds between kills, on average")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stall", type=float, default=300.0,
                        help="seconds a role may go without a successful operation")
    parser.add_argument("--fault", action="append", default=[],
                        help="a fault to put in on purpose (soak_faults; the tests)")
    args = parser.parse_args(argv)
    # the tests' C1-only JVM option (for short-lived children) fills these long-lived JVMs'
    # code caches; they keep the rest (the tests' class archive)
    opts = os.environ.pop("SPARK_SUBMIT_OPTS", "").replace("-XX:TieredStopAtLevel=1", "")
    if opts.strip():
        os.environ["SPARK_SUBMIT_OPTS"] = opts.strip()
    root = args.root or tempfile.mkdtemp(prefix="sbqueue-soak-")
    rules = Rules(routes, dedupe=frozenset({DEDUPE}), forwarding=frozenset(FORWARDS),
                  places=places, stall=args.stall)
    report, fleet = soak(args.minutes, root, args.kill_every, args.seed, args.fault, rules)
    (histories_of(root) / "report.json").write_text(json.dumps(
        {"violations": report.violations, "work": report.work,
         "unattributed": report.unattributed, "kills": fleet.kills}, indent=1))
    print(table(report, fleet))
    print(f"namespace: {root}, histories: {histories_of(root)}")
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
