"""``sbqueue send``, ``receive`` and ``peek``: the client from the command line.

Output is a rich table, or JSON lines with ``--json`` (one object per message).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from typing import Any

import click
from rich.table import Table

from sbqueue.cli_shared import console, namespace_option, parse_props, quiet_session
from sbqueue.core.durations import parse_duration
from sbqueue.core.sizes import STRING_PROPERTIES

__all__ = ["peek", "receive", "send"]



def _client(namespace: str) -> Any:
    from sbqueue.client import ServiceBusClient

    return ServiceBusClient(namespace, spark=quiet_session(namespace))


def _receiver(namespace: str, queue: str, dead_letter: bool, **options: Any) -> Any:
    """A receiver of QUEUE, or of its dead-letter queue."""
    from sbqueue.client import ServiceBusSubQueue

    return _client(namespace).get_queue_receiver(
        queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER if dead_letter else None, **options)


def _message(spec: dict[str, Any]) -> Any:
    """A ServiceBusMessage from a JSON object: ``body`` plus any property of S2.1."""
    from sbqueue.client import ServiceBusMessage

    spec = dict(spec)
    if "body" not in spec:
        raise click.BadParameter(f"message {json.dumps(spec)[:80]} has no 'body'")
    body = spec.pop("body")
    ttl = spec.pop("time_to_live", None)
    when = spec.pop("scheduled_enqueue_time_utc", None)
    unknown = sorted(set(spec) - set(STRING_PROPERTIES) - {"application_properties"})
    if unknown:
        raise click.BadParameter(f"unknown message field(s) {', '.join(unknown)} (S2.1)")
    return ServiceBusMessage(
        body if isinstance(body, str) else json.dumps(body),
        time_to_live=None if ttl is None else _duration(str(ttl)),
        scheduled_enqueue_time_utc=None if when is None else datetime.fromisoformat(when),
        **spec)


def _duration(text: str) -> timedelta:
    try:
        return timedelta(seconds=float(text))
    except (ValueError, OverflowError):  # not a number, or NaN or infinite seconds
        return parse_duration(text, "time_to_live", "S8.1")


def _as_json(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"sequence_number": message.sequence_number, "body": str(message)}
    for name in (*STRING_PROPERTIES, "delivery_count", "lock_token", "locked_until_utc",
                 "enqueued_time_utc", "expires_at_utc", "dead_letter_reason",
                 "dead_letter_error_description", "application_properties"):
        value = getattr(message, name)
        if value is not None:
            out[name] = value
    out["state"] = message.state.name
    plain: dict[str, Any] = json.loads(json.dumps(out, default=str))
    return plain


def _show(messages: list[Any], as_json: bool, title: str) -> None:
    if as_json:
        for message in messages:
            click.echo(json.dumps(_as_json(message)))
        return
    table = Table("sequence", "partition", "message id", "state", "deliveries", "body",
                  title=f"{title}: {len(messages)} message(s)")
    for m in messages:
        table.add_row(str(m.sequence_number), str(m.partition_id), m.message_id or "",
                      m.state.name, str(m.delivery_count), str(m)[:60])
    console.print(table)


@click.command()
@namespace_option
@click.argument("queue")
@click.argument("body", required=False)
@click.option("--file", "file_", type=click.File("r"), help="JSON lines: one message each.")
@click.option("--property", "-p", "properties", multiple=True,
              help="Application property key=value (repeatable).")
@click.option("--message-id")
@click.option("--session-id")
@click.option("--partition-key")
@click.option("--subject")
@click.option("--content-type")
@click.option("--correlation-id")
@click.option("--ttl", help="Time to live: seconds or ISO-8601 (PT30S).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def send(namespace: str, queue: str, body: str | None, file_: Any,
         properties: tuple[str, ...], ttl: str | None, as_json: bool, **fields: Any) -> None:
    """Send BODY, or each JSON line of --file, or stdin's lines, to QUEUE (or a topic: its
    subscriptions' rules decide who gets a copy) in one commit."""
    if body is not None:
        specs = [{"body": body, **{k: v for k, v in fields.items() if v is not None}}]
        if properties:
            specs[0]["application_properties"] = parse_props(properties)
        if ttl is not None:
            specs[0]["time_to_live"] = ttl
    else:
        lines = (file_ or sys.stdin).read().splitlines()
        specs = [_line(line) for line in lines if line.strip()]
    messages = [_message(s) for s in specs]
    client = _client(namespace)
    to_topic = client.namespace.catalog.exists("topic", queue)
    with (client.get_topic_sender(queue) if to_topic else client.get_queue_sender(queue)
          ) as sender:
        sender.send_messages(messages)
    if as_json:
        click.echo(json.dumps({"queue": queue, "sent": len(messages)}))
    else:
        console.print(f"sent {len(messages)} message(s) to [cyan]{queue}[/]")


def _line(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return {"body": line}  # a plain text line is a body
    return value if isinstance(value, dict) else {"body": line}


@click.command()
@namespace_option
@click.argument("queue")
@click.option("--max", "max_count", default=10, show_default=True)
@click.option("--wait", default=5.0, show_default=True, help="Seconds to wait for messages.")
@click.option("--peek-lock/--receive-and-delete", default=True, show_default=True)
@click.option("--complete", is_flag=True, help="Complete what was received (peek-lock).")
@click.option("--dead-letter-queue", "dlq", is_flag=True, help="Receive the dead-letter queue.")
@click.option("--json", "as_json", is_flag=True)
def receive(namespace: str, queue: str, max_count: int, wait: float, peek_lock: bool,
            complete: bool, dlq: bool, as_json: bool) -> None:
    """Receive up to --max messages from QUEUE (locked until their lock expires unless
    --complete)."""
    mode = "peek_lock" if peek_lock else "receive_and_delete"
    with _receiver(namespace, queue, dlq, receive_mode=mode, max_wait_time=wait) as receiver:
        messages = receiver.receive_messages(max_count)
        if complete and peek_lock:
            for message in messages:
                receiver.complete_message(message)
    _show(messages, as_json, f"received from {queue}" + (" (completed)" if complete else ""))


@click.command()
@namespace_option
@click.argument("queue")
@click.option("--max", "max_count", default=10, show_default=True)
@click.option("--dead-letter-queue", "dlq", is_flag=True, help="Peek the dead-letter queue.")
@click.option("--json", "as_json", is_flag=True)
def peek(namespace: str, queue: str, max_count: int, dlq: bool, as_json: bool) -> None:
    """Show up to --max messages of QUEUE without locking or changing them (S9)."""
    with _receiver(namespace, queue, dlq) as receiver:
        messages = receiver.peek_messages(max_count)
    _show(messages, as_json, f"peek {queue}")
