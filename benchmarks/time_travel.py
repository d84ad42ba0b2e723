"""Issue 22 point 4: reading an entity as of a past version, and replaying it, against the
raw Delta time travel of its inbox, in the same run.

A queue of 1,000 messages sent in four commits (the version read is the second, 500
messages), then 300 received and completed. Each round, interleaved:

- ``raw_as_of``: ``versionAsOf`` of the inbox alone, counted (what Delta gives);
- ``as_of``: ``Entity.as_of(version)`` counted (both tables as of then, the view's SELECT);
- ``messages``: the entity's view now, counted (the same SELECT at the latest versions);
- ``replay``: ``Entity.replay`` of the 500 to another queue (a DataFrame send).

    python benchmarks/time_travel.py [--reps 5]

Results: ``benchmarks/results/time_travel-<date>.jsonl``.
"""

from __future__ import annotations

import argparse
from typing import Any

from commit_cost import _interleaved
from common import run_parts

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient

BODY = "x" * 1000


def time_travel(spark: Any, root: str, reps: int) -> dict[str, Any]:
    admin = ServiceBusAdministrationClient(root, spark=spark)
    admin.create_queue("orders", enable_partitioning=True, lock_duration="PT5M")
    admin.create_queue("audit", enable_partitioning=True)
    orders = Namespace(root, spark).entity("orders")
    version = 0
    with ServiceBusClient(root, spark=spark) as client:
        sender = client.get_queue_sender("orders")
        for start in range(0, 1000, 250):
            sender.send_messages([ServiceBusMessage(BODY, message_id=f"m{i}",
                                                    partition_key=f"k{i}")
                                  for i in range(start, start + 250)])
            version = orders.version() if start == 250 else version
        with client.get_queue_receiver("orders", max_wait_time=30) as receiver:
            got = []
            while len(got) < 300:
                got += receiver.receive_messages(300 - len(got))
            for message in got:
                receiver.complete_message(message)
    inbox = orders.inbox

    rounds = [(("raw_as_of", lambda: inbox.read(version).count()),
               ("as_of", lambda: orders.as_of(version).count()),
               ("messages", lambda: orders.messages().count()),
               ("replay", lambda: orders.replay(version, "audit")))
              for _ in range(reps)]
    p50, jobs = _interleaved(spark, rounds)
    return {"part": "time_travel", "reps": reps, "version": version,
            "as_of_messages": orders.as_of(version).count(), "p50_s": p50, "jobs": jobs,
            "ratio_to_raw_as_of": {k: round(v / p50["raw_as_of"], 2)
                                   for k, v in p50.items() if k != "raw_as_of"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    run_parts("sbqueue-bench-time-travel", "time_travel",
              {"time_travel": lambda spark, root: time_travel(spark, root, args.reps)})


if __name__ == "__main__":
    main()
