"""Spike for decision 011: ways of recording a settlement (and a lock renewal), measured
side by side against a raw one-row Delta append, interleaved, on a real entity's ledger.

Each round receives a few messages through the engine, then settles one of them with each
candidate in turn (a fresh message each), and appends one raw row beside them:

- ``raw_append``  one row appended to a Delta table (the floor: one job, no conflicts)
- ``merge``       today's settlement: read + checkpoint + guarded MERGE (``Entity.settle``)
- ``delete``      a keyed Delta DELETE whose predicate is the whole rule: literal partition,
                  lane and sequence number, the caller's lock token and ``locked_until >
                  now``; its affected-row count says whether it settled (no read first)
- ``update``      the same as an UPDATE (renew: set ``locked_until``)
- ``record``      a blind append of a settlement record to a side table, plus finding the
                  version and commit time it landed with (``DESCRIBE HISTORY``, by its
                  ``userMetadata``): what the caller judges against its lock
- ``fold``        what a receive adds to read the records of the last few commits (change
                  data feed, narrow columns)
- ``delete10``    one keyed DELETE for ten messages (group commit), per message

    python benchmarks/spikes/settle_shapes.py [--rounds 7]

Prints one JSON line: per shape the median seconds and Spark jobs, and the ratio to the
raw append of the same rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import measured
from spikes.common import scratch, session

from sbqueue import Namespace
from sbqueue.core.sequence import COUNTER_BITS
from sbqueue.core.transitions import SettleContext, settle_outcome, settle_valid
from sbqueue.engine.settle.apply import apply_by_sequence
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store.delta import latest_version

BODY = "x" * 1000


def _keyed(locks: list[tuple[int, str]], lane: str = "main") -> str:
    parts = sorted({seq >> COUNTER_BITS for seq, _ in locks})
    pairs = " OR ".join(f"(sequence_number = {seq} AND lock_token = '{token}')"
                        for seq, token in locks)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return (f"partition_id IN ({', '.join(map(str, parts))}) AND lane = '{lane}' "
            f"AND row_type = 'm' AND ({pairs}) AND locked_until_utc > TIMESTAMP '{now}'")


RECORD = "partition_id int, sequence_number long, lock_token string, kind string"


def _record(spark: Any, records: str, lock: tuple[int, str]) -> tuple[int, Any]:
    """Append one settlement record, then find the version and commit time it landed with
    (by its own commit's ``userMetadata``): what the caller compares with its lock."""
    mark = uuid.uuid4().hex
    (spark.createDataFrame([(lock[0] >> COUNTER_BITS, lock[0], lock[1], "complete")], RECORD)
     .write.format("delta").mode("append").option("userMetadata", mark).save(records))
    history = spark.sql(f"DESCRIBE HISTORY delta.`{records}` LIMIT 8").select(
        "version", "timestamp", "userMetadata").collect()
    return next((int(r[0]), r[1]) for r in history if r[2] == mark)


def run(rounds: int) -> dict[str, Any]:
    spark = session()
    shapes = ("raw_append", "merge", "delete", "update", "record", "fold", "delete10")
    times: dict[str, list[float]] = {s: [] for s in shapes}
    jobs: dict[str, list[int]] = {s: [] for s in shapes}
    with scratch("settle") as root:
        admin = ServiceBusAdministrationClient(root, spark=spark)
        admin.create_queue("q", lock_duration="PT5M")
        ns = Namespace(root, spark=spark)
        q = ns.entity("q")
        raw, records = f"{root}/raw", f"{root}/records"
        spark.range(1).selectExpr("id", f"'{BODY}' AS body").write.format("delta").save(raw)
        spark.createDataFrame([], RECORD).write.format("delta").partitionBy(
            "partition_id").option("delta.enableChangeDataFeed", "true").option(
            "delta.enableInCommitTimestamps", "true").save(records)
        q.send_dataframe(spark.range(20 * rounds).selectExpr(f"'{BODY}' AS body"))
        for _ in range(rounds):
            held = q.receive_dataframe(14).select("sequence_number", "lock_token").collect()
            locks = [(int(r[0]), str(r[1])) for r in held]
            steps = _steps(spark, q, raw, records, locks)
            for shape in shapes:  # interleaved: every shape once per round
                _, seconds, n = measured(spark, steps[shape])
                per = 10 if shape == "delete10" else 1
                times[shape].append(seconds / per)
                jobs[shape].append(n)
    base = statistics.median(times["raw_append"])
    return {"spike": "settle_shapes", "rounds": rounds, "shapes": {
        s: {"p50_s": round(statistics.median(times[s]), 3),
            "jobs": int(statistics.median(jobs[s])),
            "ratio": round(statistics.median(times[s]) / base, 2)} for s in shapes}}


def _merge(spark: Any, q: Any, lock: tuple[int, str]) -> Any:
    """The guarded MERGE path of one settlement (read, checkpoint, verdicts, MERGE)."""
    ctx = SettleContext(now=datetime.now(timezone.utc), kind="complete", max_delivery_count=10)
    return apply_by_sequence(q.ledger, [lock], ("main", "deferred"),
                             settle_valid(ctx.now), settle_outcome(ctx))


def _steps(spark: Any, q: Any, raw: str, records: str, locks: list[tuple[int, str]]
           ) -> dict[str, Any]:
    """One round's operations, each on messages of its own."""
    return {
        "raw_append": lambda: spark.range(1).selectExpr("id", f"'{BODY}' AS body")
        .write.format("delta").mode("append").save(raw),
        "merge": lambda: _merge(spark, q, locks[0]),
        "delete": lambda: spark.sql(
            f"DELETE FROM delta.`{q.ledger_path}` WHERE {_keyed([locks[1]])}").collect(),
        "update": lambda: spark.sql(
            f"UPDATE delta.`{q.ledger_path}` SET locked_until_utc = locked_until_utc "
            f"+ INTERVAL 1 MINUTE WHERE {_keyed([locks[2]])}").collect(),
        "record": lambda: _record(spark, records, locks[3]),
        "fold": lambda: spark.read.format("delta").option("readChangeFeed", "true")
        .option("startingVersion", max(0, latest_version(spark, records) - 3))
        .load(records).select("sequence_number", "lock_token").collect(),
        "delete10": lambda: spark.sql(
            f"DELETE FROM delta.`{q.ledger_path}` WHERE {_keyed(locks[4:14])}"
        ).collect(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    started = time.perf_counter()
    report = run(args.rounds)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
