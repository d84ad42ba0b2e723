"""The forward job: forwarding steps (S13) over one entity or every forwarding source.

    spark-submit jobs/forward.py --namespace PATH [--entity q ...] [--loop --interval 30]
    sbqueue-forward ...                     (the wheel's entry point; Databricks wheel task)
    sbqueue forward ...                     (the command line)

Forwarding is done by this job, not at send: a message reaches its destination within
one interval plus one step (decision 010).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sbqueue.engine.forward.job import DEFAULT_BATCH, ForwardResult, forward_namespace
from sbqueue.jobs.runner import add_loop_options, base_parser, loop, run_job

__all__ = ["forward_once", "main", "parser"]


def parser() -> argparse.ArgumentParser:
    p = base_parser("sbqueue-forward", "Move messages of forwarding entities (S13).")
    p.add_argument("--entity", action="append", default=None,
                   help="a queue or topic/Subscriptions/name (repeat; default: all that "
                        "forward)")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                   help=f"messages per batch (default {DEFAULT_BATCH})")
    add_loop_options(p)
    return p


def forward_once(namespace: Any, entities: list[str] | None, batch: int) -> dict[str, Any]:
    """One step at each entity; the totals and each entity's result."""
    results = forward_namespace(namespace, entities, batch)
    total = ForwardResult()
    for result in results.values():
        total = total.add(result)
    return {**asdict(total), "entities": {k: asdict(v) for k, v in results.items()},
            "failed": {k: v.error for k, v in results.items() if v.error}}


def _body(args: argparse.Namespace, namespace: Any) -> dict[str, Any]:
    return loop(args, lambda: forward_once(namespace, args.entity, args.batch))


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("sbqueue-forward", parser(), _body, argv)


def run() -> None:
    raise SystemExit(main())
