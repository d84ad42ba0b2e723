"""Issue 18: the cost of one operation against a raw Delta operation, one command.

Parts (each prints one JSON line; ``--parts`` picks some):

- ``single``: p50 seconds and Spark jobs of a client send of one message, a
  ``receive_messages(1)``, a ``renew_message_lock`` (a keyed UPDATE in Spark, right after
  the receive's commit), a ``complete_message``, a ``schedule_messages`` of one and a
  ``cancel_scheduled_messages`` of one, a session receiver's ``receive_messages(1)`` and
  ``complete_message``, each interleaved with a raw one-row Delta append (1 KB body) in
  the same round; ratios to the append. The operations that commit on the driver are also
  set beside ``raw_append_here``, a one-row delta-rs append to a table laid out as an
  inbox (no Spark): the like-for-like baseline. ``receive`` and ``complete`` commit on the driver
  (decision 012 step 4, the default); ``receive_merge`` and ``complete_merge`` are the same
  calls with ``SBQUEUE_DRIVER_COMMITS=0``: the guarded MERGE in Spark, side by side.
- ``sdk50``: the SDK's common pattern: ``receive_messages(max_message_count=50)`` with the
  default 60 s lock, then ``complete_message`` on each in turn: how many locks were lost and
  how much of the lock was left after the 50th.
- ``loop``: the client loop (receive one, complete it) with 1, 4 and 16 threads of one
  process on a 16-partition queue, and 4 threads on a 1-partition queue: messages per
  second, conflicts retried, and the share of the machine's CPU busy meanwhile.
- ``aio``: the same loop as 16 asyncio tasks of ``sbqueue.aio`` (issue 20 point 5).
- ``create``: ``create_queue`` beside a raw ``CREATE TABLE`` of one Delta table.
- ``frames``: a DataFrame send, receive and complete of 100 messages, each beside a raw
  100-row append; the complete also with driver commits off (decision 021).
- ``counts``: ``get_queue_runtime_properties`` of a queue of 1,000 messages in every state
  (locked, completed by a record, deferred, dead-lettered, scheduled, not yet received),
  read on the driver (``engine.reads.tally``) and through the SQL view (driver reads off), each
  beside a raw one-row append (decision 022).
- ``renewer``: ``AutoLockRenewer`` keeping 100 messages (60 s lock) for ``--renew-minutes``,
  then completing them: how many were lost.
- ``drain``, ``forward``, ``pool``: the DataFrame drain of ``--drain`` messages
  (``engine_scale.bulk``: 100,000 a round, and all in one receive, ``--drains`` times
  each, each drain on its own queue; the median reported), forwarding ``--forward``
  messages (``jobs.forward``) and the session worker pool (``sessions.pool``), each beside
  its own raw baseline.

    python benchmarks/commit_cost.py [--parts single,sdk50,loop,create] [--reps 7]
        [--executor auto|local|spark] [--store local|s3]

With ``--store s3`` the namespace lives on a moto S3 server process (``benchmarks/on_s3.py``)
and the part ``s3single`` reports each operation's requests to the store beside its time:
``--store s3 --parts s3single,sdk50,loop``.

Results: ``benchmarks/results/commit_cost-<date>.jsonl`` (append the printed lines).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from common import cpu_ticks, measured, run_parts

from sbqueue import AutoLockRenewer, ServiceBusClient, ServiceBusMessage
from sbqueue.exceptions import MessageLockLostError
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store.guarded import conflicts_retried

BODY = "x" * 1000
# The single part's operations that commit on the driver (no Spark job) on a local folder.
_DRIVER_KEYS = ("send", "receive", "complete", "schedule", "cancel", "session_receive",
                "session_complete")


def _raw(spark: Any, root: str) -> tuple[str, Any]:
    path = f"{root}/raw"
    row = spark.range(1).selectExpr("id", f"'{BODY}' AS body")
    row.write.format("delta").save(path)
    return path, lambda: row.write.format("delta").mode("append").save(path)


def _raw_here(root: str) -> Any:
    """A raw one-row append made by delta-rs on the driver (no Spark, no JVM), to a table
    laid out as an inbox is (partitioned by partition id and segment, a 1 KB body): the
    like-for-like baseline of the operations that commit on the driver."""
    import pyarrow as pa
    from deltalake import write_deltalake

    path = f"{root}/raw-here"
    row = pa.table({"partition_id": pa.array([0], pa.int32()),
                    "segment": pa.array([0], pa.int64()), "body": [BODY]})
    layout = ["partition_id", "segment"]
    write_deltalake(path, row, partition_by=layout)
    return lambda: write_deltalake(path, row, mode="append", partition_by=layout)


def _interleaved(spark: Any, rounds: list[tuple[tuple[str, Any], ...]]
                 ) -> tuple[dict[str, float], dict[str, int]]:
    """Run each round's (key, operation) steps in order; the p50 seconds and Spark jobs of
    every key over all rounds."""
    times: dict[str, list[float]] = {}
    jobs: dict[str, list[int]] = {}
    for steps in rounds:
        for key, fn in steps:
            _, seconds, n = measured(spark, fn)
            times.setdefault(key, []).append(seconds)
            jobs.setdefault(key, []).append(n)
    return ({k: round(statistics.median(v), 3) for k, v in times.items()},
            {k: int(statistics.median(v)) for k, v in jobs.items()})


def spark_merges(fn: Any) -> Any:
    """``fn()`` with a small receive's commits made by Spark's guarded MERGE (the path
    before decision 012's step 4)."""
    os.environ["SBQUEUE_DRIVER_COMMITS"] = "0"
    try:
        return fn()
    finally:
        os.environ.pop("SBQUEUE_DRIVER_COMMITS", None)


def single(spark: Any, root: str, reps: int) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("single", enable_partitioning=True, lock_duration="PT5M")
    client = ServiceBusClient(root, spark=spark)
    sender = client.get_queue_sender("single")
    receiver = client.get_queue_receiver("single", max_wait_time=30)
    admin.create_queue("sessions", requires_session=True, lock_duration="PT5M")
    client.get_queue_sender("sessions").send_messages(
        [ServiceBusMessage(BODY, session_id="s") for _ in range(reps)])
    session = client.get_queue_receiver("sessions", session_id="s", max_wait_time=30)
    session.__enter__()
    _, raw_append = _raw(spark, root)
    raw_here = _raw_here(root)
    keys = ("raw_append", "send", "receive", "renew", "complete", "schedule", "cancel",
            "session_receive", "session_complete", "receive_merge", "complete_merge")
    later = datetime.now(timezone.utc) + timedelta(hours=1)

    def round_() -> tuple[tuple[str, Any], ...]:
        got: list[Any] = []
        seqs: list[int] = []
        return (
            ("raw_append", raw_append),
            ("send", lambda: sender.send_messages(ServiceBusMessage(BODY))),
            ("raw_append_here", raw_here),
            ("raw_append", raw_append),
            ("receive", lambda got=got: got.extend(receiver.receive_messages(1))),
            ("raw_append_here", raw_here),
            ("raw_append", raw_append),
            ("renew", lambda got=got: receiver.renew_message_lock(got[0])),
            ("raw_append", raw_append),
            ("complete", lambda got=got: receiver.complete_message(got[0])),
            ("raw_append_here", raw_here),
            ("raw_append", raw_append),
            ("schedule", lambda seqs=seqs: seqs.extend(
                sender.schedule_messages(ServiceBusMessage(BODY), later))),
            ("raw_append", raw_append),
            ("cancel", lambda seqs=seqs: sender.cancel_scheduled_messages(seqs[0])),
            ("raw_append", raw_append),
            ("session_receive", lambda got=got: got.extend(session.receive_messages(1))),
            ("raw_append", raw_append),
            ("session_complete", lambda got=got: session.complete_message(got[-1])),
            ("send", lambda: sender.send_messages(ServiceBusMessage(BODY))),
            ("raw_append", raw_append),
            ("receive_merge", lambda got=got: got.extend(spark_merges(
                lambda: receiver.receive_messages(1)))),
            ("raw_append", raw_append),
            ("complete_merge", lambda got=got: spark_merges(
                lambda: receiver.complete_message(got[-1]))),
        )

    p50, jobs = _interleaved(spark, [round_() for _ in range(reps)])
    session.close()
    return {"part": "single", "reps": reps, "p50_s": p50, "jobs": jobs,
            "ratio_to_raw_append": {k: round(p50[k] / p50["raw_append"], 2)
                                    for k in keys[1:]},
            # the operations that commit on the driver, beside delta-rs's own append
            "ratio_to_raw_append_here": {k: round(p50[k] / p50["raw_append_here"], 2)
                                         for k in _DRIVER_KEYS}}


def frames(spark: Any, root: str, reps: int) -> dict[str, Any]:
    """The DataFrame API at a small size (decision 021): a send of 100 rows, a receive of
    100 (decided on the driver) and its complete, each beside a raw 100-row Delta append;
    ``complete_merge`` is the same complete with driver commits off (the guarded MERGE)."""
    from sbqueue import Namespace

    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("frames", enable_partitioning=True, lock_duration="PT5M")
    queue = Namespace(root, spark).entity("frames")
    rows = spark.range(100).selectExpr(f"'{BODY}' AS body", "CAST(id AS STRING) AS partition_key")
    path = f"{root}/raw-frames"
    raw = spark.range(100).selectExpr("id", f"'{BODY}' AS body")
    raw.write.format("delta").save(path)

    def raw_append() -> None:
        raw.write.format("delta").mode("append").save(path)

    def round_() -> tuple[tuple[str, Any], ...]:
        got: list[Any] = []
        return (
            ("raw_append_100", raw_append),
            ("send_dataframe_100", lambda: queue.send_dataframe(rows)),
            ("raw_append_100", raw_append),
            ("receive_dataframe_100", lambda got=got: got.append(
                queue.receive_dataframe(100).localCheckpoint())),
            ("raw_append_100", raw_append),
            ("complete_dataframe_100", lambda got=got: queue.complete_dataframe(got[0])),
            ("send_dataframe_100", lambda: queue.send_dataframe(rows)),
            ("receive_dataframe_100", lambda got=got: got.append(
                queue.receive_dataframe(100).localCheckpoint())),
            ("raw_append_100", raw_append),
            ("complete_merge_100", lambda got=got: spark_merges(
                lambda: queue.complete_dataframe(got[1]))),
        )

    p50, jobs = _interleaved(spark, [round_() for _ in range(reps)])
    return {"part": "frames", "reps": reps, "p50_s": p50, "jobs": jobs,
            "ratio_to_raw_append": {k: round(v / p50["raw_append_100"], 2)
                                    for k, v in p50.items() if k != "raw_append_100"}}


def counts(spark: Any, root: str, reps: int) -> dict[str, Any]:
    """Runtime properties on the driver and through the view, beside a raw append."""
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("counts", enable_partitioning=True, lock_duration="PT5M")
    client = ServiceBusClient(root, spark=spark)
    sender = client.get_queue_sender("counts")
    for start in range(0, 1000, 250):
        sender.send_messages([ServiceBusMessage(BODY, partition_key=f"k{i}")
                              for i in range(start, start + 250)])
    sender.schedule_messages([ServiceBusMessage(BODY) for _ in range(10)],
                             datetime.now(timezone.utc) + timedelta(hours=1))
    receiver = client.get_queue_receiver("counts", max_wait_time=30)
    got = receiver.receive_messages(100)
    for k, message in enumerate(got[:30]):
        [receiver.complete_message, receiver.defer_message, receiver.dead_letter_message][
            k % 3](message)
    _, raw_append = _raw(spark, root)

    def view() -> Any:
        os.environ["SBQUEUE_DRIVER_READS"] = "0"
        try:
            return admin.get_queue_runtime_properties("counts")
        finally:
            os.environ.pop("SBQUEUE_DRIVER_READS", None)

    here = admin.get_queue_runtime_properties("counts")
    there = view()
    same = (here.active_message_count, here.scheduled_message_count,
            here.dead_letter_message_count) == (there.active_message_count,
                                                there.scheduled_message_count,
                                                there.dead_letter_message_count)
    rounds = [(("raw_append", raw_append),
               ("runtime_properties", lambda: admin.get_queue_runtime_properties("counts")),
               ("raw_append", raw_append), ("runtime_properties_view", view))
              for _ in range(reps)]
    p50, jobs = _interleaved(spark, rounds)
    return {"part": "counts", "reps": reps, "p50_s": p50, "jobs": jobs, "same_counts": same,
            "counts": [here.active_message_count, here.scheduled_message_count,
                       here.dead_letter_message_count],
            "ratio_to_raw_append": {k: round(v / p50["raw_append"], 2)
                                    for k, v in p50.items() if k != "raw_append"}}


def sdk50(spark: Any, root: str) -> dict[str, Any]:
    """receive_messages(50) on a 60 s lock, then complete_message on each in turn."""
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("sdk", enable_partitioning=True)  # default lock: 60 s
    client = ServiceBusClient(root, spark=spark)
    with client.get_queue_sender("sdk") as sender:
        sender.send_messages([ServiceBusMessage(BODY) for _ in range(50)])
    lost, done = 0, 0
    with client.get_queue_receiver("sdk", max_wait_time=30) as receiver:
        got = receiver.receive_messages(max_message_count=50, max_wait_time=30)
        while len(got) < 50:  # a receive may return fewer: ask again, as SDK users do
            more = receiver.receive_messages(max_message_count=50 - len(got))
            if not more:
                break
            got += more
        started = time.perf_counter()
        for message in got:
            try:
                receiver.complete_message(message)
                done += 1
            except MessageLockLostError:
                lost += 1
        seconds = time.perf_counter() - started
        last = got[-1].locked_until_utc if got else None
    left = (last - datetime.now(timezone.utc)).total_seconds() if last else None
    return {"part": "sdk50", "received": len(got), "completed": done, "lock_lost": lost,
            "complete_each_s": round(seconds / max(1, len(got)), 3),
            "lock_left_after_last_s": round(left, 1) if left is not None else None}


def loop(spark: Any, root: str, messages: int) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    client = ServiceBusClient(root, spark=spark)
    rates: dict[str, float] = {}
    conflicts: dict[str, int] = {}
    commits: dict[str, dict[str, int]] = {}
    busy_share: dict[str, float] = {}
    for threads, partitioned in ((1, True), (4, True), (16, True), (4, False)):
        name = f"loop{threads}" + ("" if partitioned else "-1p")
        admin.create_queue(name, enable_partitioning=partitioned)
        with client.get_queue_sender(name) as sender:
            sender.send_messages([ServiceBusMessage(BODY) for _ in range(messages)])
        counted = [0]
        last = [0.0]  # when the last message was completed: the final empty receive's
        guard = threading.Lock()  # wait for more (max_wait_time) is not the loop's time

        def work(name: str = name, counted: list[int] = counted,
                 guard: threading.Lock = guard, last: list[float] = last) -> None:
            with client.get_queue_receiver(name, max_wait_time=5) as receiver:
                while batch := receiver.receive_messages(1, max_wait_time=5):
                    receiver.complete_message(batch[0])
                    with guard:
                        counted[0] += 1
                        last[0] = time.perf_counter()

        before, grouped = conflicts_retried(), _group_commits()
        started, ticks = time.perf_counter(), cpu_ticks()
        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        seconds = last[0] - started
        busy, total = (a - b for a, b in zip(cpu_ticks(), ticks, strict=True))
        key = f"{threads}_threads" + ("" if partitioned else "_1_partition")
        rates[key] = round(counted[0] / seconds, 2)
        conflicts[key] = conflicts_retried() - before
        busy_share[key] = round(busy / total, 2) if total else 0.0
        after = _group_commits()
        commits[key] = {k: after.get(k, 0) - grouped.get(k, 0) for k in after}
    return {"part": "loop", "messages": messages, "msg_per_s": rates,
            "conflicts_retried": conflicts, "cpu_busy_share": busy_share,
            "group_commits": commits}


def aio_loop(spark: Any, root: str, messages: int, tasks: int = 16) -> dict[str, Any]:
    """The client loop as ``tasks`` asyncio tasks on one 16-partition queue."""
    import asyncio

    from sbqueue.aio import ServiceBusClient as AsyncClient

    ServiceBusAdministrationClient(root, spark=spark).create_queue(
        "aio", enable_partitioning=True)
    with ServiceBusClient(root, spark=spark).get_queue_sender("aio") as sender:
        sender.send_messages([ServiceBusMessage(BODY) for _ in range(messages)])

    async def run() -> tuple[int, float]:
        done, last = [0], [0.0]
        async with AsyncClient(root, spark=spark) as client:
            async def task() -> None:
                async with client.get_queue_receiver("aio", max_wait_time=5) as receiver:
                    while batch := await receiver.receive_messages(1):
                        await receiver.complete_message(batch[0])
                        done[0] += 1
                        last[0] = time.perf_counter()
            started = time.perf_counter()
            await asyncio.gather(*(task() for _ in range(tasks)))
        return done[0], last[0] - started

    count, seconds = asyncio.run(run())
    return {"part": "aio", "messages": count, "tasks": tasks,
            "msg_per_s": round(count / seconds, 2)}


def _group_commits() -> dict[str, int]:
    """Commits made so far by the process's group commits, by kind (receive, complete)."""
    from sbqueue.engine.group import _groups

    out: dict[str, int] = {}
    for key, group in list(_groups.items()):
        kind = str(key[0]) if isinstance(key, tuple) else str(key)
        out[kind] = out.get(kind, 0) + group.commits
    return out


def create(spark: Any, root: str, reps: int) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    rounds = [(
        ("raw_create_table", lambda i=i: spark.sql(
            f"CREATE TABLE delta.`{root}/raw{i}` (partition_id INT, body STRING) "
            "USING delta PARTITIONED BY (partition_id)")),
        ("create_queue", lambda i=i: admin.create_queue(f"q{i}", enable_partitioning=True)),
    ) for i in range(reps)]
    p50, jobs = _interleaved(spark, rounds)
    return {"part": "create", "reps": reps, "p50_s": p50, "jobs": jobs,
            "ratio": round(p50["create_queue"] / p50["raw_create_table"], 2)}


def renewer(spark: Any, root: str, minutes: float) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("renew", enable_partitioning=True)  # 60 s lock
    client = ServiceBusClient(root, spark=spark)
    with client.get_queue_sender("renew") as sender:
        sender.send_messages([ServiceBusMessage(BODY) for _ in range(100)])
    failures: list[Any] = []
    with client.get_queue_receiver("renew", max_wait_time=30) as receiver:
        got: list[Any] = []
        while len(got) < 100 and (more := receiver.receive_messages(100 - len(got))):
            got += more
        renew = AutoLockRenewer(max_lock_renewal_duration=minutes * 60 + 600)
        for message in got:
            renew.register(receiver, message,
                           on_lock_renew_failure=lambda _r, _e: failures.append(1))
        time.sleep(minutes * 60)
        lost = 0
        for message in got:
            try:
                receiver.complete_message(message)
            except MessageLockLostError:
                lost += 1
        renew.close()
    return {"part": "renewer", "messages": len(got), "minutes": minutes, "lock_lost": lost,
            "renew_failures": len(failures)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parts", default="single,sdk50,loop,create")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--loop-messages", type=int, default=60)
    parser.add_argument("--renew-minutes", type=float, default=5.0)
    parser.add_argument("--drain", type=int, default=1_000_000)
    parser.add_argument("--drains", type=int, default=3, help="drains of each batch size")
    parser.add_argument("--forward", type=int, default=100_000)
    parser.add_argument("--executor", choices=("auto", "local", "spark"), default="auto",
                        help="SBQUEUE_EXECUTOR for the whole run (issue 43)")
    parser.add_argument("--store", choices=("local", "s3"), default="local",
                        help="s3: the namespace on a moto S3 server process, with the "
                             "s3single part (requests per operation; issue 44)")
    args = parser.parse_args()
    os.environ["SBQUEUE_EXECUTOR"] = args.executor

    def drain(spark: Any, root: str) -> dict[str, Any]:
        from engine_scale import bulk

        return {**bulk(spark, root, 1, args.drain, (100_000, args.drain), args.drains),
                "part": "drain"}

    def forward(spark: Any, root: str) -> dict[str, Any]:
        from jobs import forward as forward_part

        return {**forward_part(spark, root, args.forward, 1), "part": "forward"}

    def pool(spark: Any, root: str) -> dict[str, Any]:
        from sessions import pool as pool_part

        return {**pool_part(spark, root, 1), "part": "pool"}

    runners = {
        "single": lambda spark, root: single(spark, root, args.reps),
        "sdk50": sdk50,
        "loop": lambda spark, root: loop(spark, root, args.loop_messages),
        "aio": lambda spark, root: aio_loop(spark, root, args.loop_messages),
        "create": lambda spark, root: create(spark, root, args.reps),
        "frames": lambda spark, root: frames(spark, root, args.reps),
        "counts": lambda spark, root: counts(spark, root, args.reps),
        "renewer": lambda spark, root: renewer(spark, root, args.renew_minutes),
        "drain": drain, "forward": forward, "pool": pool,
    }
    if args.store == "local":
        run_parts("sbqueue-bench-commit-cost", args.parts, runners)
        return
    import tempfile
    from pathlib import Path

    from on_s3 import s3_namespace
    from on_s3 import single as s3single

    with s3_namespace(Path(tempfile.mkdtemp()) / "moto.log") as (root, requests):
        runners["s3single"] = lambda spark, root: s3single(spark, root, requests, args.reps)
        run_parts("sbqueue-bench-commit-cost", args.parts, runners, root)


if __name__ == "__main__":
    main()
