"""Issue 22 point 2: draining a queue with ``readStream.format("sbqueue")`` into a Delta
table, against the DataFrame loop that does the same (``receive_dataframe``, append the
batch to a Delta table, ``complete_dataframe``), on the same backlog, in the same run.

Each round, interleaved: ``--messages`` messages are sent, then drained by the stream
(``availableNow``, ``maxMessagesPerBatch`` = ``--batch``); sent again, then drained by the
loop (batches of ``--batch``). Reported: median seconds and messages per second of each,
and the stream's ratio to the loop.

    python benchmarks/stream_source.py [--reps 3] [--messages 2000] [--batch 500]

Results: ``benchmarks/results/stream_source-<date>.jsonl``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from common import run_parts

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.datasource import register
from sbqueue.management import ServiceBusAdministrationClient


def _fill(root: str, spark: Any, messages: int) -> None:
    with ServiceBusClient(root, spark=spark) as client:
        sender = client.get_queue_sender("orders")
        for start in range(0, messages, 200):
            sender.send_messages([ServiceBusMessage("x" * 100, partition_key=f"k{i % 97}")
                                  for i in range(start, min(messages, start + 200))])


def _stream(spark: Any, root: str, work: Path, rep: int, batch: int) -> float:
    started = time.perf_counter()
    (spark.readStream.format("sbqueue").option("namespace", root).option("entity", "orders")
     .option("maxMessagesPerBatch", batch).load()
     .select("message_id", "body").writeStream.format("delta")
     .option("checkpointLocation", str(work / f"cp-{rep}")).trigger(availableNow=True)
     .start(str(work / f"stream-{rep}")).awaitTermination())
    return time.perf_counter() - started


def _loop(spark: Any, root: str, work: Path, rep: int, batch: int) -> float:
    entity = Namespace(root, spark).entity("orders")
    started = time.perf_counter()
    while True:
        got = entity.receive_dataframe(batch).localCheckpoint()
        if got.isEmpty():
            break
        got.select("message_id", "body").write.format("delta").mode("append").save(
            str(work / f"loop-{rep}"))
        entity.complete_dataframe(got)
    return time.perf_counter() - started


def stream_source(spark: Any, root: str, reps: int, messages: int, batch: int
                  ) -> dict[str, Any]:
    register(spark)
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("orders", enable_partitioning=True, lock_duration="PT5M")
    work = Path(root).parent / "stream-source-work"
    times: dict[str, list[float]] = {"loop": [], "stream": []}
    for rep in range(reps):
        for name, run in (("stream", _stream), ("loop", _loop)):
            _fill(root, spark, messages)
            times[name].append(run(spark, root, work, rep, batch))
            left = admin.namespace.entity("orders").counts()["total"]
            assert left == 0, (name, left)
    p50 = {k: round(statistics.median(v), 2) for k, v in times.items()}
    return {"part": "stream_source", "reps": reps, "messages": messages, "batch": batch,
            "p50_s": p50, "msg_per_s": {k: round(messages / v) for k, v in p50.items()},
            "ratio_to_loop": round(p50["stream"] / p50["loop"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    run_parts("sbqueue-bench-stream-source", "stream_source",
              {"stream_source": lambda spark, root: stream_source(
                  spark, root, args.reps, args.messages, args.batch)})


if __name__ == "__main__":
    main()
