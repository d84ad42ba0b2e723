"""spark-submit entry point of the demo job.

    spark-submit --properties-file "$(sbqueue spark-conf)" jobs/demo.py [namespace [messages]]

The session is the one spark-submit configured (its --master and confs win); the job prints
the master it ran under, then what it did.
"""

from __future__ import annotations

import sys

from sbqueue.demo import run_demo
from sbqueue.spark import get_session

if __name__ == "__main__":
    spark = get_session("sbqueue-demo-job")
    print(f"master={spark.sparkContext.master}")
    namespace = sys.argv[1] if len(sys.argv) > 1 else "./sbqueue-data"
    messages = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    report = run_demo(namespace, messages=messages, batch=max(1, messages // 3))
    print(report)
    sys.exit(0 if report.completed == report.sent else 1)
