"""The ``sbqueue`` command line (click for parsing, rich for tables).

Every command takes ``--namespace`` (default ``$SBQUEUE_NAMESPACE`` or ``./sbqueue-data``).
"""

from __future__ import annotations

import json
import os
import sys

import click
from rich.table import Table

from sbqueue.cli_explorer import explorer
from sbqueue.cli_messages import peek, receive, send
from sbqueue.cli_replay import replay
from sbqueue.cli_rules import apply, rule
from sbqueue.cli_shared import (
    admin_client,
    console,
    namespace_option,
    parse_props,
    print_error,
    print_properties,
    quiet_session,
)
from sbqueue.exceptions import ServiceBusError


@click.group()
def main() -> None:
    """Azure Service Bus queues on Spark and Delta Lake."""


@main.command()
@namespace_option
@click.option("--messages", default=3000, show_default=True, help="How many to send.")
@click.option("--batch", default=1000, show_default=True, help="Messages per receive.")
def demo(namespace: str, messages: int, batch: int) -> None:
    """Run the demo job on a local namespace and print what it did."""
    from sbqueue.demo import run_demo

    console.print(f"[bold]sbqueue demo[/] on namespace [cyan]{namespace}[/]")
    quiet_session(namespace, now=True)
    report = run_demo(namespace, messages=messages, batch=batch)
    table = Table(title=f"queue {report.queue}: messages per partition")
    table.add_column("partition", justify="right")
    table.add_column("sent", justify="right")
    table.add_column("received+completed", justify="right")
    for p in sorted(report.per_partition_sent):
        table.add_row(str(p), str(report.per_partition_sent[p]),
                      str(report.per_partition_received.get(p, 0)))
    console.print(table)
    timings = Table(title="timings")
    timings.add_column("step")
    timings.add_column("seconds", justify="right")
    for step, seconds in report.timings.items():
        timings.add_row(step, f"{seconds:.2f}")
    console.print(timings)
    console.print(
        f"sent {report.sent}, received {report.received} in {report.batches} batches, "
        f"completed {report.completed}; left in queue: {report.remaining}"
    )
    console.print(f"[bold]client tour[/] on queue {report.queue}-support:")
    for step in report.client_steps:
        console.print(f"  - {step}")
    if report.completed != report.sent or report.remaining.get("total", 0) != 0:
        raise SystemExit("demo: not every message was received and completed")


_PASS_THROUGH = {"ignore_unknown_options": True, "help_option_names": []}


def _namespace_of(args: tuple[str, ...]) -> str | None:
    """The ``--namespace`` a job's arguments name (its session needs S3A for an S3 one)."""
    for n, arg in enumerate(args):
        if arg == "--namespace" and n + 1 < len(args):
            return args[n + 1]
        if arg.startswith("--namespace="):
            return arg.split("=", 1)[1]
    return os.environ.get("SBQUEUE_NAMESPACE")


def _job(module: str, args: tuple[str, ...]) -> None:
    """Run a job's ``main`` with these arguments in a quiet session; its exit code."""
    import importlib

    if not {"-h", "--help"} & set(args):
        quiet_session(_namespace_of(args), now=True)
    code = importlib.import_module(f"sbqueue.jobs.{module}").main(list(args))
    if code:
        raise SystemExit(code)


@main.command(context_settings=_PASS_THROUGH)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def forward(args: tuple[str, ...]) -> None:
    """Move messages of forwarding entities (S13): the forward job (--help for its
    options: --namespace, --entity, --batch, --loop, --interval)."""
    _job("forward", args)


@main.command(context_settings=_PASS_THROUGH)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def maintain(args: tuple[str, ...]) -> None:
    """Maintain entities (expiry, segments, compaction, vacuum, idle deletion): the
    maintain job (--help for its options)."""
    _job("maintain", args)


@main.command("spark-conf")
@click.option("--store", type=click.Choice(["local", "s3"]), default="local",
              show_default=True, help="where the namespaces live: s3 adds S3A and the "
              "put-if-absent log store (credentials come from the AWS environment)")
def spark_conf(store: str) -> None:
    """Print the path of a spark-submit --properties-file for this machine."""
    from sbqueue.spark import submit_properties

    click.echo(str(submit_properties(store)))


@main.group()
def queue() -> None:
    """Create, list, show and delete queues."""


@queue.command("create")
@namespace_option
@click.argument("name")
@click.argument("properties", nargs=-1)
def queue_create(namespace: str, name: str, properties: tuple[str, ...]) -> None:
    """Create queue NAME with SDK property names, e.g. enable_partitioning=true."""
    props = admin_client(namespace).create_queue(name, **parse_props(properties))
    console.print(f"created queue [cyan]{props.name}[/] with {props.partition_count} partition(s)")


@queue.command("list")
@namespace_option
def queue_list(namespace: str) -> None:
    """List the queues of the namespace."""
    table = Table("name", "partitions", "sessions", "duplicate detection", "status")
    for q in admin_client(namespace, spark=False).list_queues():
        table.add_row(q.name, str(q.partition_count), str(q.requires_session),
                      str(q.requires_duplicate_detection), q.status.value)
    console.print(table)


@queue.command("show")
@namespace_option
@click.argument("name")
@click.option("--runtime", is_flag=True, help="Add the runtime counts (starts Spark).")
def queue_show(namespace: str, name: str, runtime: bool) -> None:
    """Show a queue's properties (and, with --runtime, its message counts)."""
    admin = admin_client(namespace, spark=runtime)
    shown = admin.get_queue(name).to_json()
    if runtime:
        shown.update(vars(admin.get_queue_runtime_properties(name)))
    print_properties(shown)


@queue.command("delete")
@namespace_option
@click.argument("name")
def queue_delete(namespace: str, name: str) -> None:
    """Delete a queue and its messages."""
    admin_client(namespace).delete_queue(name)
    console.print(f"deleted queue [cyan]{name}[/]")


@main.group()
def topic() -> None:
    """Create, list, show and delete topics."""


@topic.command("create")
@namespace_option
@click.argument("name")
@click.argument("properties", nargs=-1)
def topic_create(namespace: str, name: str, properties: tuple[str, ...]) -> None:
    """Create topic NAME with SDK property names, e.g. enable_partitioning=true."""
    props = admin_client(namespace).create_topic(name, **parse_props(properties))
    console.print(f"created topic [cyan]{props.name}[/] with {props.partition_count} partition(s)")


@topic.command("list")
@namespace_option
def topic_list(namespace: str) -> None:
    """List the topics of the namespace."""
    admin = admin_client(namespace, spark=False)
    table = Table("name", "partitions", "subscriptions", "duplicate detection", "status")
    for t in admin.list_topics():
        table.add_row(t.name, str(t.partition_count), str(len(admin.list_subscriptions(t.name))),
                      str(t.requires_duplicate_detection), t.status.value)
    console.print(table)


@topic.command("show")
@namespace_option
@click.argument("name")
def topic_show(namespace: str, name: str) -> None:
    """Show a topic's properties."""
    print_properties(admin_client(namespace, spark=False).get_topic(name).to_json())


@topic.command("delete")
@namespace_option
@click.argument("name")
def topic_delete(namespace: str, name: str) -> None:
    """Delete a topic and its subscriptions."""
    admin_client(namespace).delete_topic(name)
    console.print(f"deleted topic [cyan]{name}[/]")


@main.group()
def subscription() -> None:
    """Create, list, show and delete subscriptions of a topic."""


@subscription.command("create")
@namespace_option
@click.argument("topic_name")
@click.argument("name")
@click.argument("properties", nargs=-1)
def subscription_create(namespace: str, topic_name: str, name: str,
                        properties: tuple[str, ...]) -> None:
    """Create subscription NAME of TOPIC_NAME, e.g. max_delivery_count=5."""
    props = admin_client(namespace).create_subscription(topic_name, name, **parse_props(properties))
    console.print(f"created subscription [cyan]{props.name}[/] of topic {props.topic_name} "
                  f"with {props.partition_count} partition(s)")


@subscription.command("list")
@namespace_option
@click.argument("topic_name")
def subscription_list(namespace: str, topic_name: str) -> None:
    """List the subscriptions of TOPIC_NAME."""
    table = Table("name", "partitions", "sessions", "max deliveries", "forward to", "status")
    for sub in admin_client(namespace, spark=False).list_subscriptions(topic_name):
        table.add_row(sub.name, str(sub.partition_count), str(sub.requires_session),
                      str(sub.max_delivery_count), sub.forward_to or "", sub.status.value)
    console.print(table)


@subscription.command("show")
@namespace_option
@click.argument("topic_name")
@click.argument("name")
def subscription_show(namespace: str, topic_name: str, name: str) -> None:
    """Show a subscription's properties."""
    print_properties(admin_client(namespace, spark=False).get_subscription(topic_name, name
                                                                          ).to_json())


@subscription.command("delete")
@namespace_option
@click.argument("topic_name")
@click.argument("name")
def subscription_delete(namespace: str, topic_name: str, name: str) -> None:
    """Delete a subscription and its messages."""
    admin_client(namespace).delete_subscription(topic_name, name)
    console.print(f"deleted subscription [cyan]{name}[/] of topic {topic_name}")


@main.command()
@namespace_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def stats(namespace: str, as_json: bool) -> None:
    """Runtime counts of every queue, and its messages per partition; and the executor
    that serves the namespace here (local or spark)."""
    admin = admin_client(namespace)
    executor = admin.namespace.executor
    rows = admin.list_queues_runtime_properties()
    per_partition = {r.name: admin.namespace.entity(r.name).partition_counts() for r in rows}
    if as_json:
        for r in rows:
            click.echo(json.dumps({
                "queue": r.name, "executor": executor, "active": r.active_message_count,
                "dead_letter": r.dead_letter_message_count,
                "scheduled": r.scheduled_message_count, "total": r.total_message_count,
                "size_in_bytes": r.size_in_bytes,
                "partitions": {str(p): n for p, n in per_partition[r.name].items()}}))
        return
    table = Table("queue", "active", "dead-letter", "scheduled", "total", "bytes",
                  "per partition", caption=f"executor: {executor}")
    for r in rows:
        spread = " ".join(str(n) for _, n in sorted(per_partition[r.name].items()))
        table.add_row(r.name, str(r.active_message_count), str(r.dead_letter_message_count),
                      str(r.scheduled_message_count), str(r.total_message_count),
                      str(r.size_in_bytes), spread)
    console.print(table)


main.add_command(send)
main.add_command(receive)
main.add_command(peek)
main.add_command(replay)
main.add_command(rule)
main.add_command(apply)
main.add_command(explorer)


def run() -> None:
    """Entry point that turns sbqueue errors into one line and exit code 1."""
    try:
        main(standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        sys.exit(1)
    except ServiceBusError as exc:
        print_error(str(exc))
        sys.exit(1)
    except Exception as exc:  # Spark, Java or OS errors: one line, not a trace
        if os.environ.get("SBQUEUE_DEBUG"):
            raise
        from sbqueue.spark.errors import one_line

        print_error(one_line(exc))
        sys.exit(1)


if __name__ == "__main__":
    run()
