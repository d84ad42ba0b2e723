"""What the ``sbqueue`` commands share: the console, ``--namespace``, property parsing."""

from __future__ import annotations

import os
from typing import Any

import click
from rich.console import Console
from rich.table import Table

__all__ = ["admin_client", "console", "namespace_option", "parse_props", "print_properties"]

console = Console()

namespace_option = click.option(
    "--namespace", "namespace", default=lambda: os.environ.get("SBQUEUE_NAMESPACE",
                                                               "./sbqueue-data"),
    show_default="$SBQUEUE_NAMESPACE or ./sbqueue-data", help="Namespace folder or URI.",
)


def admin_client(namespace: str) -> Any:
    from sbqueue.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient(namespace)


def parse_props(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``key=value`` pairs; true/false become bools and digits ints, the rest stays text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not key=value")
        parsed: Any = value
        if value.lower() in ("true", "false"):
            parsed = value.lower() == "true"
        elif value.isdigit():
            parsed = int(value)
        out[key.replace("-", "_")] = parsed
    return out


def print_properties(values: dict[str, Any]) -> None:
    table = Table("property", "value")
    for key, value in values.items():
        table.add_row(key, str(value))
    console.print(table)
