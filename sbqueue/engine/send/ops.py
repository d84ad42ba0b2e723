"""Send to a queue (S2-S4): checked, under the size quota, appended in one commit.

A client's small send is decided and committed on the driver where the inbox is local
(``send.small``: no Spark job); a DataFrame send, or one the driver cannot take, is a Spark
append (``send.frame``). The same rows either way; a forwarding batch and a streaming sink's
batch are appended at most once by their ids.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame

from sbqueue.engine.handle import EntityHandle
from sbqueue.engine.send.frame import SendResult
from sbqueue.engine.send.frame import send_dataframe as send_frame
from sbqueue.engine.send.small import (
    Outgoing,
    commit_once,
    forwarded_rows,
    inbox_rows,
    result_of,
)
from sbqueue.store.thresholds import SMALL_SEND

__all__ = ["send_dataframe", "send_forwarded", "send_messages", "send_once"]


def send_dataframe(entity: EntityHandle, df: DataFrame, round_robin_start: int = 0,
                   incoming_bytes: int = 0, send_id: str | None = None,
                   forwarded: bool = False, idempotent: bool = False,
                   in_send_order: bool = False) -> SendResult:
    """Append ``df`` (``body`` plus any message column of S2.1) in one commit.
    ``incoming_bytes``: the send's size when the caller knows it (the client), for the
    size quota (S1.6); ``send_id``: a transaction's (decision 008) or, ``forwarded``,
    a forwarding step's batch; ``idempotent``: at most once per send id (decision
    010); ``in_send_order``: the caller reads the send's numbers in send order
    (``sequence_numbers``), else batch indexes are grouped by partition (decision
    018: a bulk receive of them numbers runs, no join)."""
    props = entity.check_sendable()
    entity.quota.check(incoming_bytes)
    result = send_frame(df, props, entity.inbox, round_robin_start,
                            entity.fenced, send_id, forwarded=forwarded,
                            idempotent=idempotent, by_partition=not in_send_order)
    entity.quota.add(result.size_in_bytes)
    return result


def send_messages(entity: EntityHandle, messages: Sequence[Outgoing], incoming_bytes: int,
                  as_dataframe: Callable[[], DataFrame], send_id: str | None = None
                  ) -> SendResult:
    """A client send: decided and committed on the driver where the inbox is local and
    the send small (``engine.send.small``, no Spark job); else ``as_dataframe()`` sent
    as a DataFrame. The same rows either way. ``send_id``: a transaction's."""
    if len(messages) > SMALL_SEND or not entity.inbox.commits_here():
        return send_dataframe(entity, as_dataframe(), incoming_bytes=incoming_bytes,
                                   send_id=send_id, in_send_order=True)
    props = entity.check_sendable()
    entity.quota.check(incoming_bytes)
    send_id = send_id or uuid.uuid4().hex
    rows = inbox_rows(messages, props, entity.fenced, entity.spread, send_id)
    version = entity.inbox.append_small(rows, send_id)
    if version is None:
        return send_dataframe(entity, as_dataframe(), incoming_bytes=incoming_bytes,
                                   send_id=send_id, in_send_order=True)
    result = result_of(rows, send_id, version)
    entity.quota.add(result.size_in_bytes)
    return result


def send_forwarded(entity: EntityHandle, rows: Sequence[Mapping[str, Any]], send_id: str) -> bool:
    """A forwarding batch (source inbox rows, numbered) appended on the driver, at most
    once per ``send_id`` (``send.small.forwarded_rows``, ``Inbox.append_once``); False,
    nothing stored, where it must be sent through Spark."""
    if not entity.inbox.commits_here():
        return False
    props = entity.check_sendable()
    out = forwarded_rows(rows, props, entity.fenced, entity.spread, send_id)
    size = sum(int(r["size_in_bytes"]) for r in out)
    entity.quota.check(size)
    done = entity.inbox.append_once(out, send_id)
    if done:
        entity.quota.add(size)
    return done is not None


def send_once(entity: EntityHandle,
              messages: Sequence[Outgoing], app_id: str, version: int) -> bool:
    """Send ``messages`` in one driver commit, at most once per ``(app_id, version)``
    (``send.small.commit_once``; a streaming sink's batch, decision 024)."""
    return commit_once(
        entity.inbox, entity.quota, entity.name, app_id, version,
        lambda send_id: inbox_rows(messages, entity.check_sendable(), entity.fenced,
                                   entity.spread, send_id))
