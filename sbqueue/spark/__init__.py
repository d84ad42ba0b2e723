"""Layer 1: the SparkSession (Delta configured, tuned for small tables)."""

from __future__ import annotations

from sbqueue.spark.session import (
    get_session,
    is_connect,
    local_conf,
    stop_session,
    submit_properties,
)

__all__ = ["get_session", "is_connect", "local_conf", "stop_session", "submit_properties"]
