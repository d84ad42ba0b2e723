"""A new process's time to its first received message, and its peak memory (issue 45, 4).

The program a cron job or a small service is: create a queue, send one message, receive
it, complete it. Measured from the parent's ``Popen`` to the program's "received" line, and
the peak resident memory of the program and every process under it (its JVM included),
sampled from ``/proc`` every 10 ms. Three ways, interleaved round by round, medians:

- ``no_jvm``: today's default on a local folder (the session starts only where a step needs
  Spark, and none does here);
- ``jvm``: the same program that starts the session first, as every program did before
  (``sbqueue.spark.get_session()``; the local executor still serves the operations);
- ``spark``: ``SBQUEUE_EXECUTOR=spark``, the Spark executor (a JVM and Spark jobs).

    python benchmarks/first_message.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

from common import median

PROGRAM = textwrap.dedent("""
    import sys
    if sys.argv[2] == "jvm":
        from sbqueue.spark import get_session
        get_session()
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.management import ServiceBusAdministrationClient
    conn = "Endpoint=" + sys.argv[1]
    ServiceBusAdministrationClient.from_connection_string(conn).create_queue("q")
    with ServiceBusClient.from_connection_string(conn) as client:
        client.get_queue_sender("q").send_messages(ServiceBusMessage("hello"))
        with client.get_queue_receiver("q", max_wait_time=30) as receiver:
            message = receiver.receive_messages(1)[0]
            print("received", flush=True)
            receiver.complete_message(message)
""")
WAYS = ("no_jvm", "jvm", "spark")


def _tree_rss_kb(root: int) -> int:
    """Resident kilobytes of ``root`` and its descendants, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS")), 0)
        except OSError:
            continue
    return total


def run_once(way: str, folder: Path) -> dict[str, float]:
    """Seconds to the first message and peak megabytes of one program run."""
    script = folder / "program.py"
    script.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k != "SBQUEUE_EXECUTOR"}
    if way == "spark":
        env["SBQUEUE_EXECUTOR"] = "spark"
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(script), str(folder / "ns"), way],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
            stop.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stdout is not None
    line = proc.stdout.readline()
    first = time.perf_counter() - started
    code = proc.wait(timeout=300)
    stop.set()
    sampler.join()
    if line.strip() != "received" or code != 0:
        raise SystemExit(f"{way}: the program failed (exit {code})")
    return {"first_s": first, "peak_mb": peak[0] / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:
            with tempfile.TemporaryDirectory(prefix="sbq-first-") as folder:
                runs[way].append(run_once(way, Path(folder)))
    report: dict[str, Any] = {"benchmark": "first_message", "date": date.today().isoformat(),
                              "rounds": args.rounds}
    for way, values in runs.items():
        report[way] = {"first_s": round(median([v["first_s"] for v in values]), 2),
                       "peak_mb": round(median([v["peak_mb"] for v in values])),
                       "first_s_all": [round(v["first_s"], 2) for v in values]}
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
