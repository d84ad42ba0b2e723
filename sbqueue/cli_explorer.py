"""``sbqueue explorer``: the namespace in a browser, and ``/metrics`` for Prometheus."""

from __future__ import annotations

import os

import click

from sbqueue.cli_shared import console, namespace_option

__all__ = ["explorer"]


@click.command()
@namespace_option
@click.option("--port", default=8765, show_default=True, help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; beyond loopback a token is required.")
@click.option("--allow-actions", is_flag=True,
              help="Allow resubmit, purge, send and status changes (read-only without).")
@click.option("--token", default=None, help="The token a browser or scraper must give "
              "(default: $SBQUEUE_EXPLORER_TOKEN).")
def explorer(namespace: str, port: int, host: str, allow_actions: bool,
             token: str | None) -> None:
    """Serve the namespace's explorer pages and /metrics until interrupted."""
    import uvicorn

    from sbqueue.explorer import Guard, create_app
    from sbqueue.explorer.guard import TOKEN_ENV, is_loopback

    token = token or os.environ.get(TOKEN_ENV) or None
    if token is None and not is_loopback(host):
        raise click.UsageError(
            f"--host {host} listens beyond this machine: give --token or set {TOKEN_ENV} "
            "(the explorer shows message bodies)")
    app = create_app(namespace, guard=Guard(token=token, allow_actions=allow_actions),
                     host=host)
    shown = f"[{host}]" if ":" in host else host
    mode = "actions allowed" if allow_actions else "read-only"
    console.print(f"sbqueue explorer of {namespace}: http://{shown}:{port}/ ({mode}"
                  f"{', token required: add ?token=...' if token else ''}); Ctrl-C stops it",
                  soft_wrap=True, highlight=False)
    uvicorn.run(app, host=host, port=port, log_level="warning")
