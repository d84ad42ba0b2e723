"""An idle receiver's cost and a waiting receiver's promptness (issue 45 point 2).

- ``idle``: a process iterating ``for message in receiver:`` (no ``max_wait_time``, as the
  SDK's samples do) on an empty 16-partition queue for ``--seconds``; its CPU time (user +
  system, from /proc) as a share of one core.
- ``latency``: a process waiting in ``receive_messages(1, max_wait_time=30)`` while this one
  sends ``--messages`` messages at random intervals (0.2-1.2 s), each carrying its send
  time; the receiver's clock at receipt minus that time: p50 and p99.
- ``raw``: a one-row delta-rs append to a plain local table in this process, interleaved
  with the sends: the floor a message's trip cannot go under.

    python benchmarks/idle_receiver.py --seconds 60 --messages 40
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import date
from pathlib import Path

from common import median, record

IDLE = textwrap.dedent("""
    import sys
    from sbqueue import ServiceBusClient
    with ServiceBusClient(sys.argv[1]).get_queue_receiver("idle") as receiver:
        print("ready", flush=True)
        for message in receiver:
            break
""")

WAITING = textwrap.dedent("""
    import sys, time
    from sbqueue import ServiceBusClient
    with ServiceBusClient(sys.argv[1]).get_queue_receiver("trip") as receiver:
        print("ready", flush=True)
        for _ in range(int(sys.argv[2])):
            got = receiver.receive_messages(1, max_wait_time=30)
            now = time.time()
            for message in got:
                receiver.complete_message(message)
                print(now - float(str(message)), flush=True)
""")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _start(program: str, *args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", program, *args],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def _idle(root: str, seconds: float) -> float:
    process = _start(IDLE, root)
    time.sleep(2)  # past the first looks
    start_cpu, start = _cpu_seconds(process.pid), time.monotonic()
    time.sleep(seconds)
    share = (_cpu_seconds(process.pid) - start_cpu) / (time.monotonic() - start)
    process.kill()
    process.wait()
    return share


def _latency(root: str, messages: int, raw_table: str) -> tuple[list[float], list[float]]:
    import pyarrow as pa
    from deltalake import write_deltalake

    from sbqueue import ServiceBusClient, ServiceBusMessage

    process = _start(WAITING, root, str(messages))
    raw: list[float] = []
    with ServiceBusClient(root).get_queue_sender("trip") as sender:
        for n in range(messages):
            time.sleep(random.uniform(0.2, 1.2))
            sender.send_messages(ServiceBusMessage(repr(time.time())))
            start = time.perf_counter()
            write_deltalake(raw_table, pa.table({"n": [n]}), mode="append")
            raw.append(time.perf_counter() - start)
    assert process.stdout is not None
    trips = [float(line) for line in process.stdout]
    process.wait()
    return trips, raw


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    from sbqueue.management import ServiceBusAdministrationClient

    folder = Path(tempfile.mkdtemp(prefix="sbq-idle-"))
    root = str(folder / "ns")
    admin = ServiceBusAdministrationClient(root)
    for name in ("idle", "trip"):
        admin.create_queue(name, enable_partitioning=True)
    share = _idle(root, args.seconds)
    trips, raw = _latency(root, args.messages, str(folder / "raw"))
    result = {"benchmark": "idle_receiver", "date": str(date.today()),
              "idle_cpu_share": round(share, 4), "idle_seconds": args.seconds,
              "messages": len(trips), "trip_p50_ms": round(1000 * _pct(trips, 0.5), 1),
              "trip_p99_ms": round(1000 * _pct(trips, 0.99), 1),
              "raw_append_p50_ms": round(1000 * median(raw), 1), "note": args.note}
    result["trip_p50_vs_raw"] = round(result["trip_p50_ms"] / result["raw_append_p50_ms"], 1)
    record("idle_receiver", result)


if __name__ == "__main__":
    sys.exit(main())
