"""Spike for DESIGN fact 4, at the mechanism: race LogStore.write across processes.

P processes (each its own JVM) write commit files 0..N-1 into one _delta_log folder with
overwrite=false, as Delta's commit does, all at once. A version that more than one process
was told it wrote is a lost commit: one writer's actions were silently replaced.

    python benchmarks/spikes/fact4_logstore_race.py [processes] [versions] [default|link]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import scratch, session

STORES = {"delta-default (HDFSLogStore)": "io.delta.storage.HDFSLogStore",
          "sbqueue LinkLogStore": "io.sbqueue.storage.LinkLogStore"}


def child(log_dir: str, store_class: str, versions: int, start_at: float) -> None:
    spark = session()
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    gateway = spark.sparkContext._gateway
    cls = jvm.java.lang.Class.forName(
        store_class, True, jvm.Thread.currentThread().getContextClassLoader())
    arg_types = gateway.new_array(jvm.java.lang.Class, 1)
    arg_types[0] = conf.getClass()
    args = gateway.new_array(jvm.java.lang.Object, 1)
    args[0] = conf
    store = cls.getConstructor(arg_types).newInstance(args)
    won = []
    while time.time() < start_at:
        time.sleep(0.005)
    for v in range(versions):
        path = jvm.org.apache.hadoop.fs.Path(f"{log_dir}/{v:020d}.json")
        lines = jvm.java.util.ArrayList()
        lines.add(f'{{"writer": {sys.argv[5]}}}')
        actions = lines.iterator()
        try:
            store.write(path, actions, False, conf)
            won.append(v)
        except Exception:  # FileAlreadyExistsException: another process has this version
            pass
    print(json.dumps(won))


def run(processes: int, versions: int, store_class: str) -> dict[str, int]:
    with scratch("race") as folder:
        log_dir = Path(folder, "_delta_log")
        log_dir.mkdir()
        start_at = time.time() + 30
        procs = [subprocess.Popen([sys.executable, __file__, "child", str(log_dir), store_class,
                                   str(versions), str(w), str(start_at)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for w in range(processes)]
        claims: dict[int, int] = {}
        for proc in procs:
            out, err = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(err[-3000:])
            for v in json.loads(out.strip().splitlines()[-1]):
                claims[v] = claims.get(v, 0) + 1
        return {"versions": versions, "claimed": len(claims),
                "claimed_twice_or_more": sum(1 for n in claims.values() if n > 1)}


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        # argv: child log_dir store versions writer start_at
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[6]))
    else:
        p = int(sys.argv[1]) if len(sys.argv) > 1 else 4
        n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
        only = sys.argv[3] if len(sys.argv) > 3 else ""
        for name, cls in STORES.items():
            if only and only not in name.lower():
                continue
            print(json.dumps({"store": name, "processes": p, **run(p, n, cls)}))
