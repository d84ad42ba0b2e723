"""sbqueue beside a PostgreSQL peek-lock queue, in the same run, interleaved (issue 45, 5).

A queue's users ask what they give up against the queue most teams already run: a
PostgreSQL table with ``FOR UPDATE SKIP LOCKED``. The peer is that queue at its best
known shape, on a server this script starts (Debian's package, ``initdb`` into a temporary
folder, 127.0.0.1 and a free port only, removed at the end, also on an error or Ctrl-C):

- a table ``(id bigserial PK, body bytea, enqueued_at, visible_at, lock_token uuid,
  delivery_count)`` with an index on ``visible_at``; receive is one UPDATE of the first
  visible rows picked ``FOR UPDATE SKIP LOCKED``, pushing their ``visible_at`` 5 minutes
  ahead (the visibility timeout is the peek-lock, as sbqueue's queues have PT5M here) with
  a new lock token; complete is a DELETE by id and lock token; send is an INSERT, a bulk
  send a binary COPY; each statement is its own transaction (autocommit), as each sbqueue
  operation is its own commit;
- durability as shipped: ``fsync``, ``full_page_writes`` and ``synchronous_commit`` on
  (a commit returns after its WAL is flushed, as an sbqueue commit returns after its Delta
  log entry is written); ``shared_buffers`` 1 GB, ``max_wal_size`` 8 GB and a 30 min
  ``checkpoint_timeout`` (no checkpoint storm in a run), ``jit`` off; autovacuum on.

Parts (one JSON line each, ``benchmarks/results/peer_postgres-<date>.jsonl``):

- ``single``: send 1, receive 1, complete 1 of 1 KB bodies, p50 and p99 of each
  (sbqueue: ``ServiceBusClient`` on a 16-partition queue, no JVM);
- ``loop``: receive one + complete it on a prefilled queue, on 1, 4 and 16 threads (each
  its own receiver or connection), messages per second;
- ``sustained``: that loop on one thread for 90 s a side on a queue holding 12,000, the
  rate in each 10 s (not in the default parts: three and a half minutes);
- ``bulk``: a bulk send of N (sbqueue: a DataFrame send from Spark; PostgreSQL: COPY) and a
  drain of N with 1 and 4 workers (sbqueue: ``receive_dataframe`` + ``complete_dataframe``;
  PostgreSQL: receive 100 with SKIP LOCKED, delete them).

Rounds alternate which side goes first. Every ratio is **sbqueue's time over
PostgreSQL's** (seconds over seconds, or PostgreSQL's rate over sbqueue's): 3.0 means
sbqueue takes three times as long.

    python benchmarks/peer_postgres.py [--parts single,loop,bulk] [--reps 30]
        [--messages 200] [--threads 1,4,16] [--bulk 1000000] [--rounds 2]
        [--sustained-messages 12000] [--seconds 90]
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

from common import record

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient

BODY = "x" * 1000
LOCK_S = 300  # the peek-lock of both sides: sbqueue's PT5M, the peer's visibility timeout
SIDES = ("postgres", "sbqueue")
SERVER_CONF = {
    "listen_addresses": "'127.0.0.1'", "max_connections": "40", "shared_buffers": "'1GB'",
    "max_wal_size": "'8GB'", "checkpoint_timeout": "'30min'", "fsync": "on",
    "full_page_writes": "on", "synchronous_commit": "on", "jit": "off",
}


# --- the PostgreSQL server -------------------------------------------------------------

def pg_bindir() -> Path | None:
    """The newest Debian PostgreSQL server's binaries, if one is installed."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    return found[-1].parent if found else None


def _as_server_user(folder: Path) -> list[str]:
    """The command prefix that runs the server's programs: initdb and postgres refuse
    root, so as root they run as ``nobody``, owning the temporary folder."""
    if os.geteuid() != 0:
        return []
    nobody = pwd.getpwnam("nobody")
    for path in (folder, *folder.rglob("*")):
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                "--clear-groups", "--"]
    return ["runuser", "-u", "nobody", "--"]


def _run(cmd: list[Any], cwd: Path) -> None:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          start_new_session=True)  # a Ctrl-C is for us: we stop the server
    if done.returncode != 0:
        raise RuntimeError(f"{Path(str(cmd[-1])).name if cmd else cmd}: "
                           f"{' '.join(map(str, cmd))} failed:\n{done.stdout}{done.stderr}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def postgres_server(bindir: Path) -> Iterator[str]:
    """A throwaway server on 127.0.0.1 (trust auth: nothing else can reach it), its unix
    socket inside its folder; yields the conninfo, stops it and deletes it on the way out."""
    folder = Path(tempfile.mkdtemp(prefix="sbq-peer-pg-"))
    data, log = folder / "data", folder / "server.log"
    (folder / "sock").mkdir()
    prefix = _as_server_user(folder)
    started = False
    try:
        _run([*prefix, bindir / "initdb", "-D", data, "-U", "postgres", "--auth=trust",
              "-E", "UTF8", "--locale=C"], folder)
        port = _free_port()
        conf = {**SERVER_CONF, "port": str(port),
                "unix_socket_directories": f"'{folder / 'sock'}'"}
        with (data / "postgresql.conf").open("a") as f:
            f.writelines(f"{k} = {v}\n" for k, v in conf.items())
        _run([*prefix, bindir / "pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "start"],
             folder)
        started = True
        yield f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    finally:
        if started:
            try:
                _run([*prefix, bindir / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop"],
                     folder)
            except RuntimeError as e:  # already gone: say so, still remove the folder
                print(f"peer_postgres: stopping the server: {e}", file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)


def server_facts(conninfo: str) -> dict[str, str]:
    """The server's version and the settings this benchmark chose, as the server reports."""
    import psycopg

    with psycopg.connect(conninfo) as conn:
        return {k: str(conn.execute(f"SHOW {k}").fetchone()[0])  # type: ignore[index]
                for k in ("server_version", *SERVER_CONF, "autovacuum")}


# --- the PostgreSQL queue --------------------------------------------------------------

class PgQueue:
    """A peek-lock queue in one table, on a connection of its own (autocommit: each
    statement is one transaction, as each sbqueue operation is one commit)."""

    def __init__(self, conninfo: str, table: str) -> None:
        import psycopg
        from psycopg import sql

        self.conn = psycopg.connect(conninfo, autocommit=True)
        t = sql.Identifier(table)
        self.create_sql = [sql.SQL(s).format(t=t, i=sql.Identifier(f"{table}_visible")) for s in (
            "DROP TABLE IF EXISTS {t}",
            "CREATE TABLE {t} (id bigserial PRIMARY KEY, body bytea NOT NULL, "
            "enqueued_at timestamptz NOT NULL DEFAULT now(), "
            "visible_at timestamptz NOT NULL DEFAULT now(), lock_token uuid, "
            "delivery_count int NOT NULL DEFAULT 0)",
            "CREATE INDEX {i} ON {t} (visible_at)")]
        self.send_sql = sql.SQL("INSERT INTO {} (body) VALUES (%s) RETURNING id").format(t)
        self.copy_sql = sql.SQL("COPY {} (body) FROM STDIN (FORMAT BINARY)").format(t)
        self.pick_sql = sql.SQL("SELECT id FROM {} WHERE visible_at <= now() ORDER BY id "
                                "LIMIT %s FOR UPDATE SKIP LOCKED").format(t)
        self.explain_sql = sql.SQL("EXPLAIN ") + self.pick_sql
        self.receive_sql = sql.SQL(
            "UPDATE {t} SET visible_at = now() + make_interval(secs => %s), "
            "lock_token = gen_random_uuid(), delivery_count = delivery_count + 1 "
            "WHERE id IN ({pick}) RETURNING id, lock_token, body, delivery_count"
        ).format(t=t, pick=self.pick_sql)
        self.complete_sql = sql.SQL("DELETE FROM {} WHERE id = %s AND lock_token = %s"
                                    ).format(t)
        # lock tokens are unique, so a row whose token is among ours is one of ours
        self.complete_many_sql = sql.SQL(
            "DELETE FROM {} WHERE id = ANY(%s) AND lock_token = ANY(%s)").format(t)

    def __enter__(self) -> PgQueue:
        return self

    def __exit__(self, *_: object) -> None:
        self.conn.close()

    def create(self) -> None:
        for statement in self.create_sql:
            self.conn.execute(statement)

    def send(self, body: bytes) -> None:
        self.conn.execute(self.send_sql, (body,))

    def copy(self, count: int, body: bytes = BODY.encode()) -> None:
        with self.conn.cursor() as cur, cur.copy(self.copy_sql) as copy:
            copy.set_types(["bytea"])
            for _ in range(count):
                copy.write_row((body,))

    def receive(self, count: int) -> list[tuple[Any, ...]]:
        return self.conn.execute(self.receive_sql, (LOCK_S, count)).fetchall()

    def complete(self, row: tuple[Any, ...]) -> None:
        if self.conn.execute(self.complete_sql, (row[0], row[1])).rowcount != 1:
            raise RuntimeError(f"postgres: lock lost on message {row[0]}")

    def drain_step(self, count: int) -> int:
        """Receive up to ``count`` and complete them all in one DELETE: messages done."""
        rows = self.receive(count)
        if not rows:
            return 0
        return self.conn.execute(self.complete_many_sql, (
            [r[0] for r in rows], [r[1] for r in rows])).rowcount

    def plan(self) -> str:
        """The receive's row picking as the planner does it now (e.g. which index)."""
        rows = self.conn.execute(self.explain_sql, (100,)).fetchall()
        return " / ".join(r[0].strip().removeprefix("->").strip() for r in rows)


# --- measuring ---------------------------------------------------------------------------

def _seconds(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _order(i: int) -> tuple[str, str]:
    """Which side goes first in round ``i``: alternating, so neither always runs warm."""
    return SIDES if i % 2 == 0 else SIDES[::-1]


def _workers(n: int, opener: Callable[[], AbstractContextManager[Any]],
             step: Callable[[Any], int]) -> tuple[int, float]:
    """(messages, seconds) of ``n`` threads, each with what ``opener`` opens (its own
    receiver or connection, opened before the clock starts), calling ``step`` until it
    does nothing; timed to the last message done, not to the final empty wait. On a
    Ctrl-C they stop before the caller deletes their folders."""
    barrier, stop = threading.Barrier(n + 1), threading.Event()
    guard = threading.Lock()
    done, last, errors = [0], [0.0], []

    def run() -> None:
        try:
            with opener() as it:
                barrier.wait()
                while not stop.is_set() and (k := step(it)) > 0:
                    with guard:
                        done[0] += k
                        last[0] = time.perf_counter()
        except BaseException as e:  # reported by the caller's thread
            errors.append(e)
            barrier.abort()

    pool = [threading.Thread(target=run, daemon=True) for _ in range(n)]
    for t in pool:
        t.start()
    with suppress(threading.BrokenBarrierError):  # a worker failed: joined, then raised
        barrier.wait()
    started = time.perf_counter()
    try:
        for t in pool:
            t.join()
    except BaseException:
        stop.set()
        for t in pool:
            t.join(timeout=60)
        raise
    if errors:
        raise errors[0]
    return done[0], max(last[0] - started, 1e-9)


def _sbq_one(receiver: Any) -> int:
    got = receiver.receive_messages(max_message_count=1)
    if got:
        receiver.complete_message(got[0])
    return len(got)


def _pg_one(queue: PgQueue) -> int:
    return queue.drain_step(1)


def _frame_step(entity: Any, batch: int) -> int:
    got = entity.receive_dataframe(batch)
    got.localCheckpoint()  # read it whole once, as a consumer reads its rows
    return int(entity.complete_dataframe(got).settled)


def _ratio(sbq: float, pg: float) -> float:
    return round(sbq / pg, 2) if pg else float("nan")


# --- the parts -----------------------------------------------------------------------------

def single(root: str, conninfo: str, reps: int) -> dict[str, Any]:
    """Send 1, receive 1, complete 1 on each side, side by side in every round."""
    ServiceBusAdministrationClient(root).create_queue(
        "single", enable_partitioning=True, lock_duration="PT5M")
    times: dict[str, list[float]] = {}
    with ServiceBusClient(root) as client, client.get_queue_sender("single") as sender, \
            client.get_queue_receiver("single", max_wait_time=30) as receiver, \
            PgQueue(conninfo, "q_single") as pg:
        pg.create()

        def one(side: str) -> dict[str, float]:
            got: list[Any] = []
            if side == "postgres":
                steps = (("send", lambda: pg.send(BODY.encode())),
                         ("receive", lambda: got.extend(pg.receive(1))),
                         ("complete", lambda: pg.complete(got[0])))
            else:
                steps = (("send", lambda: sender.send_messages(ServiceBusMessage(BODY))),
                         ("receive", lambda: got.extend(
                             receiver.receive_messages(max_message_count=1))),
                         ("complete", lambda: receiver.complete_message(got[0])))
            return {op: _seconds(fn) for op, fn in steps}

        for i in range(reps + 2):  # the first two rounds warm both up, unrecorded
            for side in _order(i):
                for op, seconds in one(side).items():
                    if i >= 2:
                        times.setdefault(f"{side}_{op}", []).append(seconds)
    stats = {k: {"p50": round(_percentile(v, 0.5), 4), "p99": round(_percentile(v, 0.99), 4)}
             for k, v in sorted(times.items())}
    return {"part": "single", "reps": reps, "seconds": stats, "ratios_sbqueue_over_pg": {
        f"{op}_{p}": _ratio(stats[f"sbqueue_{op}"][p], stats[f"postgres_{op}"][p])
        for op in ("send", "receive", "complete") for p in ("p50", "p99")}}


def loop(root: str, conninfo: str, messages: int, threads: list[int],
         rounds: int) -> dict[str, Any]:
    """Receive one + complete it on a prefilled queue, with 1, 4, 16 threads a side."""
    admin = ServiceBusAdministrationClient(root)
    rates: dict[str, dict[int, list[float]]] = {s: {t: [] for t in threads} for s in SIDES}
    counts: dict[str, list[int]] = {s: [] for s in SIDES}
    plan = ""
    with ServiceBusClient(root) as client:  # queues kept: a delete starts Spark (a JVM)
        for r in range(rounds):
            for k, n in enumerate(threads):
                name = f"loop-{n}-{r}"
                admin.create_queue(name, enable_partitioning=True, lock_duration="PT5M")
                with client.get_queue_sender(name) as sender:
                    for start in range(0, messages, 100):
                        sender.send_messages([ServiceBusMessage(BODY) for _ in range(
                            min(100, messages - start))])
                with PgQueue(conninfo, "q_loop") as pg:
                    pg.create()
                    pg.copy(messages)
                    plan = plan or pg.plan()
                runs = {"postgres": partial(_workers, n, partial(PgQueue, conninfo, "q_loop"),
                                            _pg_one),
                        "sbqueue": partial(_workers, n, partial(
                            client.get_queue_receiver, name, max_wait_time=5), _sbq_one)}
                for side in _order(r * len(threads) + k):
                    done, seconds = runs[side]()
                    rates[side][n].append(done / seconds)
                    counts[side].append(done)
    med = {s: {f"{n}_threads": round(statistics.median(v), 1) for n, v in by.items()}
           for s, by in rates.items()}
    return {"part": "loop", "messages": messages, "rounds": rounds, "msg_per_s": med,
            "messages_done_min": {s: min(v) for s, v in counts.items()},
            "pg_receive_plan": plan, "ratios_sbqueue_over_pg": {
                k: _ratio(med["postgres"][k], med["sbqueue"][k]) for k in med["sbqueue"]}}


def sustained(root: str, conninfo: str, messages: int, seconds: float) -> dict[str, Any]:
    """The loop on one thread for ``seconds`` a side on a queue holding ``messages``
    (PostgreSQL's: enough for its rate over ``seconds``): the rate in each 10 s, which must
    not fall as the minutes pass (a cost that grows with what the queue holds or with the
    last minute's work shows here, not in a short loop)."""
    name = "sustained"
    ServiceBusAdministrationClient(root).create_queue(name, enable_partitioning=True,
                                                      lock_duration="PT5M")
    windows: dict[str, list[float]] = {}
    with ServiceBusClient(root) as client:
        with client.get_queue_sender(name) as sender:
            for start in range(0, messages, 100):
                sender.send_messages([ServiceBusMessage(BODY)
                                      for _ in range(min(100, messages - start))])
        with PgQueue(conninfo, "q_sustained") as pg:  # enough to last: ~700 msg/s here
            pg.create()
            pg.copy(max(messages, int(1000 * seconds)))
        sides = {"sbqueue": partial(client.get_queue_receiver, name, max_wait_time=5),
                 "postgres": partial(PgQueue, conninfo, "q_sustained")}
        for side in _order(0):
            step = _sbq_one if side == "sbqueue" else _pg_one
            with sides[side]() as it:
                windows[side] = _windows(lambda it=it, step=step: step(it), seconds)
    return {"part": "sustained", "messages": messages, "seconds": seconds,
            "msg_per_s_each_10s": windows,
            "first_over_last_10s": {s: round(w[0] / w[-1], 2) if w and w[-1] else None
                                    for s, w in windows.items()}}


def _windows(step: Callable[[], int], seconds: float) -> list[float]:
    """Messages a second in each 10 s of calling ``step`` for ``seconds``."""
    rates, start = [], time.perf_counter()
    mark, done = start, 0
    while (now := time.perf_counter()) - start < seconds:
        if now - mark >= 10:
            rates.append(round(done / (now - mark), 1))
            mark, done = now, 0
        got = step()
        if not got:
            break
        done += got
    return rates


def bulk(root: str, conninfo: str, count: int, rounds: int, workers: list[int],
         pg_batch: int, frame_batch: int) -> dict[str, Any]:
    """A bulk send of ``count`` and its drain by 1 and 4 workers, each side on a fresh
    queue every time; sbqueue receives a frame of ``batch`` a round, PostgreSQL
    ``pg_batch`` a statement (each side at the batch its users would pick)."""
    from sbqueue.spark import get_session

    spark = get_session("sbqueue-bench-peer-postgres")  # the DataFrame side needs Spark
    admin = ServiceBusAdministrationClient(root, spark=spark)
    ns = Namespace(root, spark=spark)
    batch = min(frame_batch, max(1000, count // 8))  # 4 workers get 2 rounds or more
    times: dict[str, list[float]] = {}
    drained: dict[str, list[int]] = {}

    def sbqueue(name: str, n: int, w: int) -> tuple[float, int, float]:
        admin.create_queue(name, enable_partitioning=True, lock_duration="PT5M")
        entity = ns.entity(name)
        rows = spark.range(n).selectExpr("repeat('x', 1000) AS body")
        sent = _seconds(lambda: entity.send_dataframe(rows))
        done, seconds = _workers(w, lambda: nullcontext(entity),
                                 lambda e: _frame_step(e, batch))
        admin.delete_queue(name)
        return sent, done, seconds

    def postgres(n: int, w: int) -> tuple[float, int, float]:
        with PgQueue(conninfo, "q_bulk") as pg:
            pg.create()
            sent = _seconds(lambda: pg.copy(n))
        done, seconds = _workers(w, lambda: PgQueue(conninfo, "q_bulk"),
                                 lambda q: q.drain_step(pg_batch))
        return sent, done, seconds

    warm = min(count, 20_000)  # JIT, plan caches, the first Delta tables: not measured
    sbqueue("bulk-warm-up", warm, 1)
    postgres(warm, 1)
    for r in range(rounds):
        for k, w in enumerate(workers):
            for side in _order(r * len(workers) + k):
                sent, done, seconds = (postgres(count, w) if side == "postgres"
                                       else sbqueue(f"bulk-{r}-{w}", count, w))
                times.setdefault(f"{side}_send", []).append(sent)
                times.setdefault(f"{side}_drain_{w}", []).append(seconds)
                drained.setdefault(f"{side}_drain_{w}", []).append(done)
    med = {k: round(statistics.median(v), 2) for k, v in sorted(times.items())}
    keys = ["send", *(f"drain_{w}" for w in workers)]
    return {"part": "bulk", "messages": count, "rounds": rounds,
            "sbqueue_frame_batch": batch, "pg_batch": pg_batch, "median_s": med,
            "runs_s": {k: [round(s, 2) for s in v] for k, v in sorted(times.items())},
            "msg_per_s": {k: round(count / v) for k, v in med.items()},
            "drained_min": {k: min(v) for k, v in drained.items()},
            "ratios_sbqueue_over_pg": {
                k: _ratio(med[f"sbqueue_{k}"], med[f"postgres_{k}"]) for k in keys}}


# --- the command ---------------------------------------------------------------------------

def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="single,loop,bulk")
    parser.add_argument("--reps", type=int, default=30, help="single: rounds measured")
    parser.add_argument("--messages", type=int, default=200, help="loop: queue size")
    parser.add_argument("--threads", type=_ints, default=[1, 4, 16], help="loop")
    parser.add_argument("--bulk", type=int, default=1_000_000, help="bulk: messages")
    parser.add_argument("--workers", type=_ints, default=[1, 4], help="bulk: drainers")
    parser.add_argument("--pg-batch", type=int, default=100, help="bulk: PG receive size")
    parser.add_argument("--frame-batch", type=int, default=100_000,
                        help="bulk: sbqueue receive_dataframe size (at most N/8)")
    parser.add_argument("--rounds", type=int, default=2, help="loop and bulk")
    parser.add_argument("--sustained-messages", type=int, default=12_000,
                        help="sustained: queue size")
    parser.add_argument("--seconds", type=float, default=90, help="sustained: a side")
    args = parser.parse_args()
    bindir = pg_bindir()
    if bindir is None:
        print("peer_postgres: skipped: no PostgreSQL server in /usr/lib/postgresql/*/bin "
              "(apt-get install postgresql)")
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        print('peer_postgres: skipped: no psycopg (python3 -m pip install '
              '"psycopg[binary]>=3.2", or the bench extra)')
        return
    runners: dict[str, Callable[[str, str], dict[str, Any]]] = {
        "single": lambda root, pg: single(root, pg, args.reps),
        "loop": lambda root, pg: loop(root, pg, args.messages, args.threads, args.rounds),
        "sustained": lambda root, pg: sustained(root, pg, args.sustained_messages,
                                                args.seconds),
        "bulk": lambda root, pg: bulk(root, pg, args.bulk, args.rounds, args.workers,
                                      args.pg_batch, args.frame_batch)}
    parts = args.parts.split(",")
    if unknown := [p for p in parts if p not in runners]:
        raise SystemExit(f"unknown part(s) {', '.join(unknown)}; known: {', '.join(runners)}")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill cleans up as Ctrl-C
    root = tempfile.mkdtemp(prefix="sbq-bench-")
    try:
        with postgres_server(bindir) as conninfo:
            facts = server_facts(conninfo)
            for part in parts:
                loadavg = round(os.getloadavg()[0], 2)
                started = time.perf_counter()
                report = runners[part](f"{root}/{part}", conninfo)
                record("peer_postgres", {
                    **report, "date": date.today().isoformat(),
                    "command": " ".join(["python", "benchmarks/peer_postgres.py", *sys.argv[1:]]),
                    "wall_s": round(time.perf_counter() - started, 1),
                    "loadavg_1m_before": loadavg, "postgres": facts,
                    "ratio": "sbqueue time / PostgreSQL time (>1: sbqueue slower)"})
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the server and the folders are gone by now
        print("peer_postgres: interrupted; the server was stopped and its folder removed",
              file=sys.stderr)
        sys.exit(130)
