"""What the explorer's pages and /metrics cost on a local namespace (issue 46), beside the
raw Delta read of the same tables and the engine reads the pages wrap.

A namespace of ``--queues`` 16-partition queues with ``--messages`` each (a tenth of
them dead-lettered) and a topic with two subscriptions. Each round, interleaved, times:

- ``raw``: every table of the namespace read whole with delta-rs (``to_pyarrow_table``),
  the floor of any read that looks at everything;
- ``stats``: the runtime properties of every queue, topic and subscription (what
  ``sbqueue stats`` and the admin client read);
- the pages, through the framework's test client (in process, no network): the namespace
  (``/``), one entity (``/entity``), a page of 25 peeked messages (``/messages``) and
  ``/metrics``.

    python benchmarks/explorer.py --rounds 7
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from common import median, record


def _fill(root: str, queues: int, messages: int) -> None:
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.management import ServiceBusAdministrationClient

    admin = ServiceBusAdministrationClient(root)
    client = ServiceBusClient(root)
    for q in range(queues):
        admin.create_queue(f"q{q}", enable_partitioning=True, max_delivery_count=1)
        with client.get_queue_sender(f"q{q}") as sender:
            for start in range(0, messages, 500):
                sender.send_messages([ServiceBusMessage(f'{{"n": {n}}}')
                                      for n in range(start, min(messages, start + 500))])
        with client.get_queue_receiver(f"q{q}") as receiver:
            dead = receiver.receive_messages(messages // 10, max_wait_time=10)
            for message in dead:
                receiver.dead_letter_message(message, reason="bench")
    admin.create_topic("t", enable_partitioning=True)
    for sub in ("a", "b"):
        admin.create_subscription("t", sub)
    with client.get_topic_sender("t") as sender:
        sender.send_messages([ServiceBusMessage(f"e{n}") for n in range(messages)])


def _raw(root: str) -> Callable[[], Any]:
    from deltalake import DeltaTable

    tables = sorted(str(p.parent) for p in Path(root).rglob("_delta_log"))
    return lambda: [DeltaTable(t).to_pyarrow_table().num_rows for t in tables]


def _stats(root: str) -> Callable[[], Any]:
    from sbqueue.management import ServiceBusAdministrationClient

    admin = ServiceBusAdministrationClient(root)

    def read() -> Any:
        queues = admin.list_queues_runtime_properties()
        topics = admin.list_topics_runtime_properties()
        subs = [admin.list_subscriptions_runtime_properties(t.name) for t in topics]
        return queues, subs

    return read


def _page(client: Any, url: str) -> Callable[[], Any]:
    def get() -> Any:
        response = client.get(url)
        assert response.status_code == 200, (url, response.text[:300])
        return response

    return get


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--queues", type=int, default=5)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    from starlette.testclient import TestClient

    from sbqueue.explorer import create_app

    root = str(Path(tempfile.mkdtemp(prefix="sbq-explorer-")) / "ns")
    _fill(root, args.queues, args.messages)
    app = TestClient(create_app(root), base_url="http://127.0.0.1")
    subjects = {"raw": _raw(root), "stats": _stats(root), "/": _page(app, "/"),
                "/entity": _page(app, "/entity?path=q0"),
                "/messages": _page(app, "/messages?path=q0"),
                "/metrics": _page(app, "/metrics")}
    for fn in subjects.values():  # warm: first reads open tables and caches
        fn()
    times: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(args.rounds):
        for name, fn in subjects.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    raw = median(times["raw"])
    result = {"benchmark": "explorer", "date": str(date.today()), "rounds": args.rounds,
              "queues": args.queues, "messages": args.messages,
              "seconds": {k: round(median(v), 4) for k, v in times.items()},
              "vs_raw": {k: round(median(v) / raw, 2) for k, v in times.items()}}
    record("explorer", result)


if __name__ == "__main__":
    sys.exit(main())
