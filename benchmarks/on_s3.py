"""Issue 44 point 6: the cost of a client operation on S3, in seconds and in store requests.

A moto S3 server process on 127.0.0.1 (``tests/s3_server.py``) serves the namespace; its
access log (one line per HTTP request) counts the requests each operation made: on real S3
each costs 10-50 ms, so the count is what a user pays there. The baselines are raw one-row
appends to a Delta table on the same server: Spark's (S3A and the put-if-absent log store,
decision 042), the issue's baseline, and delta-rs's, the like-for-like one for the
driver's commits.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from s3_server import aws_env, make_bucket, moto_server

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient

BODY = "x" * 1000


class Requests:
    """The server's requests so far, from its access log."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def count(self) -> int:
        try:
            return sum(1 for line in self.log.read_text(errors="replace").splitlines()
                       if '" 2' in line or '" 3' in line or '" 4' in line or '" 5' in line)
        except FileNotFoundError:
            return 0


@contextmanager
def s3_namespace(log: Path) -> Iterator[tuple[str, Requests]]:
    """A fresh namespace root on a moto server whose access log goes to ``log``."""
    with moto_server(log) as endpoint:
        make_bucket(endpoint)
        os.environ.update(aws_env(endpoint))
        yield f"s3://sbq-test/bench-{uuid.uuid4().hex[:8]}", Requests(log)


def _timed(requests: Requests, fn: Callable[[], Any]) -> tuple[float, int]:
    before = requests.count()
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    time.sleep(0.05)  # the server writes its log line after it answered
    return seconds, requests.count() - before


def single(spark: Any, root: str, requests: Requests, reps: int) -> dict[str, Any]:
    """p50 seconds and requests of each client operation, interleaved with the raw
    delta-rs append; ratios to it."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from sbqueue.store.objects import storage_options

    raw_path = f"{root}/raw"
    row = pa.table({"partition_id": pa.array([0], pa.int32()), "body": [BODY]})
    opts = storage_options(raw_path)
    write_deltalake(raw_path, row, partition_by=["partition_id"], storage_options=opts)

    def raw() -> None:
        write_deltalake(raw_path, row, mode="append", partition_by=["partition_id"],
                        storage_options=opts)

    spark_path = f"{root}/raw_spark".replace("s3://", "s3a://")
    spark_row = spark.createDataFrame([(0, BODY)], "partition_id int, body string")
    spark_row.write.format("delta").partitionBy("partition_id").save(spark_path)

    def raw_spark() -> None:
        spark_row.write.format("delta").mode("append").save(spark_path)

    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("single", enable_partitioning=True, lock_duration="PT5M")
    client = ServiceBusClient(root, spark=spark)
    sender = client.get_queue_sender("single")
    receiver = client.get_queue_receiver("single", max_wait_time=30)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    seconds: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for _ in range(reps):
        got: list[Any] = []
        for key, fn in (
                ("raw_spark_append", raw_spark),
                ("raw_append", raw),
                ("send", lambda: sender.send_messages(ServiceBusMessage(BODY))),
                ("raw_append", raw),
                ("receive", lambda got=got: got.extend(receiver.receive_messages(1))),
                ("raw_append", raw),
                ("renew", lambda got=got: receiver.renew_message_lock(got[0])),
                ("complete", lambda got=got: receiver.complete_message(got[0])),
                ("raw_append", raw),
                ("raw_spark_append", raw_spark),
                ("schedule", lambda got=got: got.extend(
                    sender.schedule_messages(ServiceBusMessage(BODY), later))),
                ("cancel", lambda got=got: sender.cancel_scheduled_messages(got[-1])),
                ("peek", lambda: receiver.peek_messages(1)),
                ("runtime_properties", lambda: admin.get_queue_runtime_properties("single"))):
            s, n = _timed(requests, fn)
            seconds.setdefault(key, []).append(s)
            counts.setdefault(key, []).append(n)
    p50 = {k: round(statistics.median(v), 3) for k, v in seconds.items()}
    return {"part": "s3single", "reps": reps, "p50_s": p50,
            "requests": {k: int(statistics.median(v)) for k, v in counts.items()},
            "ratio_to_raw_append": {k: round(v / p50["raw_append"], 2)
                                    for k, v in p50.items() if not k.startswith("raw")},
            "ratio_to_raw_spark_append": {k: round(v / p50["raw_spark_append"], 3)
                                          for k, v in p50.items() if not k.startswith("raw")}}
