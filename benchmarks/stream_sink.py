"""Issue 22 point 1: a Structured Streaming query into a queue (``format("sbqueue")``)
against the same query into a plain Delta table, in the same run.

Each round, interleaved: a fresh folder of ``--batches`` JSON files of ``--rows`` messages
is streamed (one file per micro-batch, ``availableNow``) into a new Delta table (``raw``,
a blind append per batch: Delta's own sink) and into a queue (``sbqueue``: each batch one
driver append carrying the query's ``txn``). Reported: the median seconds per query and
messages per second, and sbqueue's ratio to raw.

    python benchmarks/stream_sink.py [--reps 3] [--batches 5] [--rows 2000]

Results: ``benchmarks/results/stream_sink-<date>.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from common import run_parts

from sbqueue.datasource import register
from sbqueue.management import ServiceBusAdministrationClient

SCHEMA = "body string, message_id string, partition_key string"


def _files(folder: Path, batches: int, rows: int) -> None:
    folder.mkdir(parents=True)
    for b in range(batches):
        lines = (json.dumps({"body": "x" * 100, "message_id": f"m{b}-{i}",
                             "partition_key": f"k{i % 97}"}) for i in range(rows))
        (folder / f"f{b:03d}.json").write_text("\n".join(lines) + "\n")


def _run(spark: Any, source: Path, fmt: str, checkpoint: Path, **options: str) -> float:
    writer = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
              .json(str(source)).writeStream.format(fmt)
              .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
    for key, value in options.items():
        writer = writer.option(key, value)
    started = time.perf_counter()
    writer.start().awaitTermination()
    return time.perf_counter() - started


def stream_sink(spark: Any, root: str, reps: int, batches: int, rows: int) -> dict[str, Any]:
    register(spark)
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("orders", enable_partitioning=True)
    work = Path(root).parent / "stream-work"
    times: dict[str, list[float]] = {"raw": [], "sbqueue": []}
    for rep in range(reps):
        source = work / f"in-{rep}"
        _files(source, batches, rows)
        times["raw"].append(_run(spark, source, "delta", work / f"cp-raw-{rep}",
                                 path=str(work / f"raw-{rep}")))
        times["sbqueue"].append(_run(spark, source, "sbqueue", work / f"cp-sbq-{rep}",
                                     namespace=root, entity="orders"))
    p50 = {k: round(statistics.median(v), 2) for k, v in times.items()}
    sent = admin.namespace.entity("orders").counts()["active"]
    assert sent == reps * batches * rows, sent
    return {"part": "stream_sink", "reps": reps, "batches": batches, "rows": rows,
            "p50_s": p50, "msg_per_s": {k: round(batches * rows / v) for k, v in p50.items()},
            "ratio_to_raw": round(p50["sbqueue"] / p50["raw"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--rows", type=int, default=2000)
    args = parser.parse_args()
    run_parts("sbqueue-bench-stream-sink", "stream_sink",
              {"stream_sink": lambda spark, root: stream_sink(spark, root, args.reps,
                                                               args.batches, args.rows)})


if __name__ == "__main__":
    main()
