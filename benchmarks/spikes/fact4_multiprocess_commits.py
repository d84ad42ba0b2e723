"""Spike for DESIGN fact 4: do separate processes lose commits on a local Delta table?

Starts P processes (each its own JVM), each making C blind appends of one row to the same
table, all at once. Every append reports success, so P*C rows and P*C commits must survive.
Run once with Delta's default local log store and once with sbqueue's LinkLogStore.

    python benchmarks/spikes/fact4_multiprocess_commits.py [processes] [commits]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import scratch, session


def child(table: str, writer: int, commits: int, default_store: bool, start_at: float) -> None:
    spark = session(default_logstore=default_store)
    spark.read.format("delta").load(table).count()  # warm-up: JVM, jars, the table's log
    while time.time() < start_at:
        time.sleep(0.01)
    for n in range(1, commits + 1):
        spark.createDataFrame([(writer, n)], "writer int, n int").write.format("delta").mode(
            "append"
        ).save(table)
    print(json.dumps({"writer": writer, "ok": commits}))


def run(processes: int, commits: int, default_store: bool) -> dict[str, object]:
    with scratch("fact4") as folder:
        table = f"{folder}/t"
        spark = session()
        spark.createDataFrame([(-1, 0)], "writer int, n int").write.format("delta").save(table)
        start_at = time.time() + 30
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "child", table, str(w), str(commits),
                 "1" if default_store else "0", str(start_at)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for w in range(processes)
        ]
        reported = 0
        for proc in procs:
            out, err = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(f"a writer failed:\n{err[-3000:]}")
            reported += json.loads(out.strip().splitlines()[-1])["ok"]
        rows = spark.read.format("delta").load(table).where("n > 0").count()
        versions = len(list(Path(table, "_delta_log").glob("*.json")))
        return {"store": "delta-default" if default_store else "LinkLogStore",
                "appends_reported": reported, "rows_found": rows,
                "lost": reported - rows, "log_files": versions}


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1",
              float(sys.argv[6]))
    else:
        p = int(sys.argv[1]) if len(sys.argv) > 1 else 4
        c = int(sys.argv[2]) if len(sys.argv) > 2 else 15
        for default in (True, False):
            print(json.dumps(run(p, c, default)))
