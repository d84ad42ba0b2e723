"""The maintain job: one maintenance step (expiry, cursors, segments, compaction, vacuum,
idle deletion; S8.2, S16.3) over one entity or the whole namespace.

    spark-submit jobs/maintain.py --namespace PATH [--entity q ...] [--no-vacuum]
    sbqueue-maintain ...                    (the wheel's entry point; Databricks wheel task)
    sbqueue maintain ...                    (the command line)
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sbqueue.engine.maintain.job import MIN_VACUUM_HOURS, Maintainer
from sbqueue.jobs.runner import add_loop_options, base_parser, loop, run_job

__all__ = ["main", "maintain_once", "parser"]


def parser() -> argparse.ArgumentParser:
    p = base_parser("sbqueue-maintain", "Maintain entities (S8.2, S16.3, decision 010).")
    p.add_argument("--entity", action="append", default=None,
                   help="a queue, topic or topic/Subscriptions/name (repeat; default: all)")
    p.add_argument("--no-vacuum", action="store_true", help="skip VACUUM")
    p.add_argument("--vacuum-hours", type=float, default=MIN_VACUUM_HOURS,
                   help=f"VACUUM retention in hours (at least {MIN_VACUUM_HOURS:g})")
    add_loop_options(p)
    return p


def maintain_once(namespace: Any, entities: list[str] | None, vacuum: bool,
                  vacuum_hours: float) -> dict[str, Any]:
    reports = Maintainer(namespace, vacuum_hours=vacuum_hours, vacuum=vacuum).run(entities)
    return {"entities": [asdict(r) for r in reports],
            "deleted": [r.path for r in reports if r.deleted],
            "segments_dropped": sum(r.segments_dropped for r in reports),
            "failed": {r.path: r.error for r in reports if r.error}}


def _body(args: argparse.Namespace, namespace: Any) -> dict[str, Any]:
    return loop(args, lambda: maintain_once(namespace, args.entity, not args.no_vacuum,
                                            args.vacuum_hours))


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("sbqueue-maintain", parser(), _body, argv)


def run() -> None:
    raise SystemExit(main())
