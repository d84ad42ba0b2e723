"""``sbqueue rule create|list|show|delete`` and ``sbqueue apply Config.json`` (S15)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table

from sbqueue.cli_shared import admin_client, console, namespace_option, parse_props
from sbqueue.core.rules import describe_filter

__all__ = ["apply", "rule"]


@click.group()
def rule() -> None:
    """Create, list, show and delete the rules of a subscription (S15)."""


@rule.command("create")
@namespace_option
@click.argument("topic_name")
@click.argument("subscription_name")
@click.argument("name")
@click.option("--sql", help="SQL filter, e.g. \"color = 'red' AND quantity > 10\".")
@click.option("--correlation", "correlation", multiple=True,
              help="Correlation filter field=value (label=..., correlation_id=...); "
                   "user properties as property.NAME=value.")
@click.option("--action", help="SQL action, e.g. \"SET priority = 'high'\".")
def rule_create(namespace: str, topic_name: str, subscription_name: str, name: str,
                sql: str | None, correlation: tuple[str, ...], action: str | None) -> None:
    """Add rule NAME to a subscription; no filter: TrueFilter. A bad filter or action is
    refused with its position (S15.7)."""
    from sbqueue.core.rules import CorrelationRuleFilter, SqlRuleAction, SqlRuleFilter

    if sql and correlation:
        raise click.BadParameter("give --sql or --correlation, not both")
    chosen: Any = None
    if sql:
        chosen = SqlRuleFilter(sql)
    elif correlation:
        fields = parse_props(correlation)
        props = {k.split(".", 1)[1]: v for k, v in fields.items() if k.startswith("property.")}
        chosen = CorrelationRuleFilter(
            **{k: v for k, v in fields.items() if not k.startswith("property.")},
            properties=props)
    created = admin_client(namespace, spark=False).create_rule(
        topic_name, subscription_name, name, filter=chosen,
        action=SqlRuleAction(action) if action else None)
    console.print(f"created rule [cyan]{created.name}[/] ({describe_filter(created.filter)})")


@rule.command("list")
@namespace_option
@click.argument("topic_name")
@click.argument("subscription_name")
def rule_list(namespace: str, topic_name: str, subscription_name: str) -> None:
    """List the rules of a subscription."""
    table = Table("name", "filter", "action")
    for r in admin_client(namespace, spark=False).list_rules(topic_name, subscription_name):
        table.add_row(r.name, describe_filter(r.filter),
                      r.action.sql_expression if r.action else "")
    console.print(table)


@rule.command("show")
@namespace_option
@click.argument("topic_name")
@click.argument("subscription_name")
@click.argument("name")
def rule_show(namespace: str, topic_name: str, subscription_name: str, name: str) -> None:
    """Show one rule as JSON."""
    found = admin_client(namespace, spark=False).get_rule(topic_name, subscription_name, name)
    click.echo(json.dumps(found.to_json(), indent=2))


@rule.command("delete")
@namespace_option
@click.argument("topic_name")
@click.argument("subscription_name")
@click.argument("name")
def rule_delete(namespace: str, topic_name: str, subscription_name: str, name: str) -> None:
    """Delete one rule."""
    admin_client(namespace, spark=False).delete_rule(topic_name, subscription_name, name)
    console.print(f"deleted rule [cyan]{name}[/]")


@click.command()
@namespace_option
@click.argument("config_file", type=click.Path(dir_okay=False))
def apply(namespace: str, config_file: str) -> None:
    """Create the queues, topics, subscriptions and rules of an emulator Config.json that
    the namespace lacks (S15.8). A bad file creates nothing."""
    report = admin_client(namespace).apply_config(config_file)
    for path in report["created"]:
        console.print(f"created [cyan]{path}[/]")
    for path in report["existing"]:
        console.print(f"exists  {path}")
    console.print(f"{len(report['created'])} created, {len(report['existing'])} already there")
