"""Spike for decision 011: where one client operation spends its time, job by job.

On a 16-partition queue (1 KB bodies) it runs rounds of ``receive_messages(1)``,
``complete_message`` and a send of one, and prints for each operation its seconds and, per
Spark job, when it started (ms after the operation began), how long it ran and its call
site. The gaps between jobs are driver work: plan building through py4j and Spark's
analysis and planning.

    python benchmarks/spikes/receive_timeline.py [--rounds 4]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spikes.common import scratch, session

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient


def timeline(spark: Any, name: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a job group of its own; print its jobs (this session's JVM status
    store: a local session only, as every spike)."""
    sc = spark.sparkContext
    group = uuid.uuid4().hex
    sc.setJobGroup(group, group)
    began = time.time() * 1000
    started = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - started
    ids = sorted(sc.statusTracker().getJobIdsForGroup(group))
    sc.setJobGroup("", "")
    print(f"{name}: {seconds:.2f} s, {len(ids)} jobs")
    store = sc._jsc.sc().statusStore()
    for job in ids:
        data = store.job(job)
        start = data.submissionTime().get().getTime()
        took = data.completionTime().get().getTime() - start
        stages = sc.statusTracker().getJobInfo(job).stageIds
        print(f"    +{start - began:6.0f} ms  {took:5d} ms  {len(stages)} stage(s)  {data.name()}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    spark = session()
    with scratch("timeline") as root:
        ServiceBusAdministrationClient(root, spark=spark).create_queue(
            "q", enable_partitioning=True, lock_duration="PT5M")
        client = ServiceBusClient(root, spark=spark)
        sender = client.get_queue_sender("q")
        receiver = client.get_queue_receiver("q", max_wait_time=30)
        sender.send_messages([ServiceBusMessage("x" * 1000) for _ in range(40)])
        for _ in range(args.rounds):
            got = timeline(spark, "receive", lambda: receiver.receive_messages(1, 5))
            timeline(spark, "complete", lambda got=got: receiver.complete_message(got[0]))
            timeline(spark, "send", lambda: sender.send_messages(ServiceBusMessage("y" * 1000)))


if __name__ == "__main__":
    main()
