"""``sbqueue replay``: an entity's messages as they stood at a past version or time, sent
again to another entity (Delta time travel, ``engine.reads.replay``)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import click

from sbqueue.cli_shared import console, namespace_option, quiet_session

__all__ = ["replay"]


def _when(text: str) -> int | datetime:
    """A version (digits) or an ISO-8601 time (UTC unless it names a zone)."""
    if text.isdigit():
        return int(text)
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither a version (digits) nor an ISO-8601 time "
            "(2026-11-27T08:00:00Z)", param_hint="--as-of") from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


@click.command()
@namespace_option
@click.argument("source")
@click.option("--as-of", "as_of", required=True,
              help="A version of SOURCE (digits) or an ISO-8601 time.")
@click.option("--to", "destination", required=True, help="The queue or topic to send to.")
@click.option("--where", default=None, help="SQL predicate over SOURCE's view.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def replay(namespace: str, source: str, as_of: str, destination: str, where: str | None,
           as_json: bool) -> None:
    """Send the messages SOURCE held at --as-of to --to again: new sequence numbers, the
    original ids and properties, and an application property naming the origin."""
    from sbqueue.engine import Namespace
    from sbqueue.engine.reads.replay import REPLAYED_FROM

    when = _when(as_of)
    entity = Namespace.existing(namespace, quiet_session(namespace)).entity(source)
    result = entity.replay(when, destination, where)
    if as_json:
        click.echo(json.dumps({"source": source, "as_of": as_of, "to": destination,
                               "sent": result.count}))
    else:
        console.print(f"replayed {result.count} message(s) of [cyan]{source}[/] as of "
                      f"{as_of} to [cyan]{destination}[/] ({REPLAYED_FROM} names the origin)")
