"""Spike for decision 011: what a one-row append to an inbox-shaped table costs, by table
property, interleaved, with Spark jobs. A client send is one such append, and it measured
~2x a raw append even with its plan prepared in advance: this says which property pays.

- ``raw``       the benchmarks' raw table: ``id, body``, unpartitioned (the floor)
- ``plain``     the inbox schema, partitioned by ``partition_id``, no properties
- ``cdf``       plus the change data feed
- ``rowtrack``  plus row tracking (``_metadata.row_commit_version`` and ``row_id``)
- ``stats``     plus statistics on six columns only
- ``inbox``     every property of today's inbox (``engine.schema.INBOX_PROPERTIES``)

    python benchmarks/spikes/append_shapes.py [--rounds 7]

Prints one JSON line: per shape the median seconds, Spark jobs and the ratio to ``raw``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import measured
from spikes.common import scratch, session

from sbqueue.engine.schema import INBOX_PROPERTIES, INBOX_SCHEMA
from sbqueue.store.delta import create_table

SHAPES: dict[str, dict[str, str]] = {
    "plain": {},
    "cdf": {"delta.enableChangeDataFeed": "true"},
    "rowtrack": {"delta.enableRowTracking": "true"},
    "stats": {"delta.dataSkippingStatsColumns":
              INBOX_PROPERTIES["delta.dataSkippingStatsColumns"]},
    "inbox": dict(INBOX_PROPERTIES),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    spark = session()
    values = {"partition_id": 3, "segment": 1, "send_id": "s", "batch_index": 0,
              "body": b"x" * 1000, "enqueued_time_utc": datetime.now(timezone.utc),
              "size_in_bytes": 1000, "message_id": "m", "hop_count": 0,
              "enqueued_sequence_number": 0}
    row = spark.createDataFrame([tuple(values.get(f.name) for f in INBOX_SCHEMA.fields)],
                                INBOX_SCHEMA)
    raw = spark.range(1).selectExpr("id", f"'{'x' * 1000}' AS body")
    with scratch("append-shapes") as root:
        raw.write.format("delta").save(f"{root}/raw")
        for name, properties in SHAPES.items():
            create_table(spark, f"{root}/{name}", INBOX_SCHEMA, ["partition_id"], properties)
        seconds: dict[str, list[float]] = {}
        jobs: dict[str, list[int]] = {}
        for _ in range(args.rounds + 1):  # the first round warms up
            for name in ("raw", *SHAPES):
                df = raw if name == "raw" else row
                _, s, n = measured(spark, lambda df=df, name=name: df.write.format("delta")
                                   .mode("append").save(f"{root}/{name}"))
                seconds.setdefault(name, []).append(s)
                jobs.setdefault(name, []).append(n)
        p50 = {k: statistics.median(v[1:]) for k, v in seconds.items()}
        print(json.dumps({"spike": "append_shapes", "rounds": args.rounds,
                          "p50_s": {k: round(v, 3) for k, v in p50.items()},
                          "jobs": {k: int(statistics.median(v[1:])) for k, v in jobs.items()},
                          "ratio": {k: round(v / p50["raw"], 2) for k, v in p50.items()}}))


if __name__ == "__main__":
    main()
