"""The resubmit job: move dead-lettered messages selected by a SQL predicate back to their
queue (or to another queue or topic), exactly once: what Service Bus users reach for
Service Bus Explorer to do.

    spark-submit jobs/resubmit.py --namespace PATH --entity orders \\
        --where "dead_letter_reason = 'MaxDeliveryCountExceeded'" [--to orders-retry]

The predicate is over the entity's Spark SQL view (``SELECT * FROM <ns.sql_name(...)>``).
A subscription's messages go back to its topic unless ``--to`` says otherwise. Messages
keep their properties; they are claimed, written once (Delta's idempotent write) and
released, so a killed run is finished by the next (decision 010).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sbqueue.core.names import subscription_parts
from sbqueue.engine.forward.job import DEFAULT_BATCH, Forwarder
from sbqueue.jobs.runner import base_parser, run_job

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    p = base_parser("sbqueue-resubmit", "Resubmit dead-lettered messages.")
    p.add_argument("--entity", required=True, help="a queue or topic/Subscriptions/name")
    p.add_argument("--where", default="true", help="SQL predicate over the entity's view")
    p.add_argument("--to", default=None, help="destination (default: the queue, or the "
                                                "subscription's topic)")
    p.add_argument("--max-messages", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH)
    return p


def _body(args: argparse.Namespace, namespace: Any) -> dict[str, Any]:
    parts = subscription_parts(args.entity)
    home = args.entity if parts is None else parts[0]
    destination = args.to or home
    result = Forwarder(namespace, args.entity, args.batch).resubmit(
        args.where, destination, args.max_messages)
    return {"entity": args.entity, "to": destination, "resubmitted": result.forwarded,
            **asdict(result)}


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("sbqueue-resubmit", parser(), _body, argv)


def run() -> None:
    raise SystemExit(main())
