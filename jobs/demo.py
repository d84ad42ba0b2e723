"""spark-submit entry point of the demo job.

    spark-submit --properties-file conf/spark-defaults.conf jobs/demo.py [namespace]
"""

from __future__ import annotations

import sys

from sbqueue.demo import run_demo

if __name__ == "__main__":
    report = run_demo(sys.argv[1] if len(sys.argv) > 1 else "./sbqueue-data")
    print(report)
    sys.exit(0 if report.completed == report.sent else 1)
