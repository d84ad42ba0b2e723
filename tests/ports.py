"""Ports on 127.0.0.1 for the servers the tests start (moto, Azurite, a Spark Connect
server, a standalone cluster, the explorer): one free port, and a wait until a process
listens on one. Each caller says itself what a server that never came up means."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

__all__ = ["free_port", "listening"]


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int, seconds: float, alive: Callable[[], bool] = lambda: True,
              pause: float = 0.2) -> bool:
    """Whether something listens on ``port`` within ``seconds``; False at once where
    ``alive()`` says the server's process is gone."""
    deadline = time.monotonic() + seconds
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        if not alive() or time.monotonic() > deadline:
            return False
        time.sleep(pause)
