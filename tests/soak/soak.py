"""The chaos soak (issue 21 point 1), one command:

    python tests/soak/soak.py --minutes 60 [--root DIR] [--kill-every 30] [--seed 1]

Creates the soak's entities (``soak_topology``) on a new local namespace, starts four
processes that run the roles (``soak_roles``, a thread per role), and for ``--minutes`` a
chaos thread sends SIGKILL to a random process every ``--kill-every`` seconds on average
and starts it again. Then every process is stopped, the final state is read, and
``soak_check`` judges the histories against it. Prints one table (role, operations,
errors, kills; each invariant with its violations) and exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from soak_check import INVARIANTS, Counted, Report, Stored, check  # noqa: E402
from soak_history import read_histories  # noqa: E402
from soak_topology import DEDUPE, FORWARDS, create, entities, routes  # noqa: E402

# The roles, by the process that runs them (each role a thread of it, each process one JVM:
# on two cores, a JVM per role spent the run starting JVMs). A kill takes a process down
# with every role in it, in the middle of whatever each was doing.
PROCESSES = {
    "producers": ("sender", "sender#2", "frame-sender"),
    "consumers": ("receiver", "receiver#2", "taker", "drain", "transaction"),
    "sessions": ("session-worker", "session-worker#2"),
    "jobs": ("forwarder", "maintainer"),
}
STOP_GRACE = 120.0  # seconds a stopped process may take to finish its operations
# A process is killed only once it has run this long: a JVM takes 20-40 s to start on two
# busy cores, and a kill during the start tests nothing but the start.
MIN_AGE = 60.0


@dataclass
class Fleet:
    """The role processes, their incarnations and the kills they took."""

    root: str
    logs: Path
    seed: int
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    starts: Counter[str] = field(default_factory=Counter)
    born: dict[str, float] = field(default_factory=dict)
    kills: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, process: str) -> None:
        self.starts[process] += 1
        n = self.starts[process]
        env = {**os.environ, "SBQUEUE_SPARK_MASTER": "local[2]",
               "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
        self.born[process] = time.monotonic()
        err = (self.logs / f"{process}-{n}.err").open("wb")
        self.procs[process] = subprocess.Popen(
            [sys.executable, str(HERE / "soak_roles.py"), ",".join(PROCESSES[process]),
             self.root, str(self.logs), str(n), str(self.seed * 1000 + n)],
            env=env, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)

    def kill_one(self, rng: random.Random) -> None:
        with self.lock:
            grown = [p for p in sorted(self.procs)
                     if time.monotonic() - self.born[p] >= MIN_AGE]
            if not grown:
                return
            process = rng.choice(grown)
            self.procs[process].send_signal(signal.SIGKILL)
            self.procs[process].wait()
            self.kills[process] += 1
            self.start(process)

    def stop(self) -> None:
        with self.lock:
            for proc in self.procs.values():
                proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            for proc in self.procs.values():
                try:
                    proc.wait(max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def chaos(fleet: Fleet, until: float, every: float, rng: random.Random) -> None:
    while time.monotonic() < until:
        time.sleep(min(rng.uniform(0.5 * every, 1.5 * every), max(0.0, until - time.monotonic())))
        if time.monotonic() < until:
            fleet.kill_one(rng)


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


def table(report: Report, fleet: Fleet) -> str:
    lines = [f"{'role':<18} {'process':<10} {'operations':>10} {'errors':>7} {'kills':>6}"]
    for process, roles in PROCESSES.items():
        for role in roles:
            lines.append(f"{role:<18} {process:<10} {report.operations[role]:>10} "
                         f"{report.errors[role]:>7} {fleet.kills[process]:>6}")
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


def seed_sessions(root: str, logs: Path, seed: int) -> None:
    """Sessions waiting before any process starts: on a slow machine the senders may send
    to no session in a short run, and the session workers would have nothing to do."""
    from soak_roles import Role, send_session

    role = Role("seed", root, logs / "seed-0.jsonl", seed)
    for session in ("s0", "s1", "s2"):
        send_session(role, session)
    role.history.close()


def soak(minutes: float, root: str, every: float, seed: int) -> tuple[Report, Fleet]:
    from sbqueue.management import ServiceBusAdministrationClient

    create(ServiceBusAdministrationClient(root))
    logs = Path(root) / "histories"
    logs.mkdir(parents=True, exist_ok=True)
    seed_sessions(root, logs, seed)
    fleet = Fleet(root, logs, seed)
    for process in PROCESSES:
        fleet.start(process)
    until = time.monotonic() + minutes * 60
    chaos(fleet, until, every, random.Random(seed))
    fleet.stop()
    stored, counted = final_state(root)
    report = check(read_histories(sorted(logs.glob("*.jsonl"))), stored, counted, routes,
                   frozenset({DEDUPE}), time.time(), forwarding=frozenset(FORWARDS))
    return report, fleet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--root", default=None, help="namespace folder (default: a new one)")
    parser.add_argument("--kill-every", type=float, default=30.0,
                        help="seconds between kills, on average")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    # the tests' C1-only JVM option (for short-lived children) fills these long-lived JVMs'
    # code caches; they keep the rest (the tests' class archive)
    opts = os.environ.pop("SPARK_SUBMIT_OPTS", "").replace("-XX:TieredStopAtLevel=1", "")
    if opts.strip():
        os.environ["SPARK_SUBMIT_OPTS"] = opts.strip()
    root = args.root or tempfile.mkdtemp(prefix="sbqueue-soak-")
    report, fleet = soak(args.minutes, root, args.kill_every, args.seed)
    print(table(report, fleet))
    print(f"namespace and histories: {root}")
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
