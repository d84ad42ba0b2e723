"""What every job shares: arguments, logging, the session, the summary and the exit code.

Under spark-submit (or on Databricks) the session already running is used as it is; on a
laptop a local one is started (``sbqueue.spark.get_session``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from sbqueue.exceptions import ServiceBusError

__all__ = ["JobError", "add_loop_options", "base_parser", "loop", "run_job"]

log = logging.getLogger("sbqueue.jobs")


class JobError(ServiceBusError):
    """Bad job input: reported as one line, exit code 2."""


def base_parser(name: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=name, description=description)
    parser.add_argument("--namespace", default=os.environ.get("SBQUEUE_NAMESPACE",
                                                              "./sbqueue-data"),
                        help="namespace folder or URI (default $SBQUEUE_NAMESPACE or "
                             "./sbqueue-data)")
    return parser


def add_loop_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--loop", action="store_true", help="run again and again")
    parser.add_argument("--interval", type=float, default=30.0,
                        help="seconds between runs with --loop (default 30)")
    parser.add_argument("--runs", type=int, default=0,
                        help="with --loop: stop after this many runs (default: never)")


def loop(args: argparse.Namespace, once: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``once`` a single time, or every ``--interval`` seconds with ``--loop``; returns
    the last run's summary with the number of runs."""
    runs = 0
    while True:
        started = time.monotonic()
        summary = once()
        runs += 1
        log.info("run %d: %s", runs, json.dumps(summary, default=str))
        if not args.loop or (args.runs and runs >= args.runs):
            return {**summary, "runs": runs}
        time.sleep(max(0.0, args.interval - (time.monotonic() - started)))


def run_job(name: str, parser: argparse.ArgumentParser,
            body: Callable[[argparse.Namespace, Any], dict[str, Any]],
            argv: Sequence[str] | None = None) -> int:
    """Parse, start (or reuse) the session, run ``body(args, namespace)``, print
    ``<name> <json summary>``. Bad input: one line on stderr, exit code 2."""
    logging.basicConfig(level=os.environ.get("SBQUEUE_LOG", "INFO"),
                        format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    args = parser.parse_args(argv)
    try:
        from sbqueue.engine import Namespace
        from sbqueue.spark import get_session

        namespace = Namespace.existing(args.namespace, get_session(name))
        started = time.monotonic()
        summary = body(args, namespace)
    except ServiceBusError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    summary["seconds"] = round(time.monotonic() - started, 2)
    print(f"{name} {json.dumps(summary, default=str)}", flush=True)
    return 0
