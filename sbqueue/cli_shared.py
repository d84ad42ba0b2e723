"""What the ``sbqueue`` commands share: the console, ``--namespace``, property parsing."""

from __future__ import annotations

import os
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["admin_client", "console", "namespace_option", "parse_props", "print_error",
           "print_properties", "quiet_session"]

console = Console()


def print_error(text: str) -> None:
    """``error: text`` on one line, whatever the terminal's width (a path the message names
    stays whole for the user to copy), and its brackets printed, not read as markup."""
    console.print(f"[red]error:[/] {escape(text)}", soft_wrap=True)


namespace_option = click.option(
    "--namespace", "namespace", default=lambda: os.environ.get("SBQUEUE_NAMESPACE",
                                                               "./sbqueue-data"),
    show_default="$SBQUEUE_NAMESPACE or ./sbqueue-data", help="Namespace folder or URI.",
)


def quiet_session(root: str | None = None, *, now: bool = False) -> Any:
    """The SparkSession for a namespace at ``root``, started (``now``, or the first time a
    step needs it: ``spark.lazy``) with the JVM's stdout and stderr on /dev/null: no Ivy
    report or Spark log lines on the terminal. Errors still reach Python as exceptions
    (and ``run`` prints them as one line)."""
    from sbqueue.spark.lazy import LazySession, when_needed

    session = when_needed(root, _quietly_built)
    return session.resolve() if now and isinstance(session, LazySession) else session


def _quietly_built(extra: dict[str, str]) -> Any:
    from sbqueue.spark import get_session

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        return get_session("sbqueue-cli", extra_conf=extra)
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)


def admin_client(namespace: str, spark: bool = True) -> Any:
    """The administration client; ``spark=False`` for commands that only read definitions
    (they answer without starting Spark)."""
    from sbqueue.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient(namespace,
                                          spark=quiet_session(namespace) if spark else None)


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
