"""A SparkSession that starts the first time a step needs Spark (issue 45, point 4).

Why: the local executor serves a client or admin program (create, send, receive, settle,
peek, counts, topics) without a Spark job, so starting a JVM for it costs seconds and
hundreds of megabytes for nothing. ``when_needed`` hands the namespace a session that
already exists where one does (the active one; spark-submit's, Spark Connect's or
Databricks': no new JVM), else a ``LazySession`` whose first attribute use builds it.

The executor is chosen before any session exists (``store.executor``): a session built
later is a local classic one, never a Connect client, so the choice stays true.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LazySession", "started", "when_needed"]


class LazySession:
    """Stands for the session ``build`` returns; builds it on first attribute use."""

    def __init__(self, build: Callable[[], SparkSession]) -> None:
        self._build = build
        self._session: SparkSession | None = None
        self._lock = threading.Lock()

    def resolve(self) -> SparkSession:
        """The session, built once (threads racing here share one)."""
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._session = self._build()
        return self._session

    @property
    def started(self) -> bool:
        """Whether a step has needed Spark yet."""
        return self._session is not None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # copy/pickle probes must not start a JVM
        return getattr(self.resolve(), name)

    def __repr__(self) -> str:
        return f"LazySession(started={self.started})"


def when_needed(root: str | None = None,
                build: Callable[[dict[str, str]], SparkSession] | None = None) -> SparkSession:
    """The session a namespace at ``root`` opens with: one that exists now (or costs no
    new JVM: spark-submit, Spark Connect, Databricks) as is, else a ``LazySession`` that
    calls ``build`` (default ``get_session``) with the extra confs ``root`` needs (S3A for
    an S3 prefix: ``spark.s3a``)."""
    from pyspark.sql import SparkSession

    from sbqueue.spark.session import configured_elsewhere, get_session, store_conf

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if configured_elsewhere() is not None:
        return get_session()
    extra = store_conf(root)
    chosen = build or (lambda conf: get_session(extra_conf=conf))
    return cast("SparkSession", LazySession(lambda: chosen(extra)))


def started(spark: object) -> bool:
    """Whether ``spark`` is a running session (a ``LazySession`` not yet used is not)."""
    return not isinstance(spark, LazySession) or spark.started
