"""A client send decided and committed on the driver: no Spark job (decision 015).

A client send is a few messages the caller holds in Python. Through Spark it cost a local
DataFrame, a job for the checks and routing, and a row-tracking append (two jobs, 4-6x a
raw append). Here the same inbox rows are made in Python and appended by
``store.tracked`` (one Parquet file per partition and one commit file, 10-30 ms).

The rows are ``engine.send.frame.prepare_send``'s, field for field: the same checks in the same
order with the same texts (S2.2, S2.4, S10.1, S4.4, S14.2), the same size (the body plus
the UTF-8 bytes of the string properties and of the properties' JSON), the same time to
live capped by the entity and counted from activation (S8.1, S8.4), the same key and
partition (S4.1, S4.2). ``tests/integration/test_send_small.py`` holds the two paths to
that row for row. Unkeyed messages are spread round robin over the available partitions
(S4.3), so single sends of one process visit every partition in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sbqueue.core.clock import utcnow
from sbqueue.core.durations import is_never
from sbqueue.core.forwarding import carried_sequence, next_hop
from sbqueue.core.properties import QueueProperties, TopicProperties
from sbqueue.core.routing import RoundRobin, partition_for, routing_key
from sbqueue.core.sizes import HEADER_LIMIT, MAX_ID_LENGTH, STRING_PROPERTIES, message_limit
from sbqueue.engine.schema import SEGMENT_SECONDS
from sbqueue.engine.send.frame import SendResult, refusal
from sbqueue.exceptions import (
    InvalidOperationError,
    PartitionUnavailableError,
    StorageConflictError,
)
from sbqueue.store.thresholds import SMALL_SEND
from sbqueue.store.variant import encode_object, micros, to_json

if TYPE_CHECKING:
    from sbqueue.engine.inbox import Inbox
    from sbqueue.engine.quota import Quota

__all__ = ["SMALL_SEND", "Outgoing", "commit_once", "forwarded_rows", "inbox_rows", "result_of"]

Outgoing = Mapping[str, Any]  # body (bytes), STRING_PROPERTIES, time_to_live,
# scheduled_enqueue_time_utc (aware), application_properties (a dict of S2.3 values)
Sendable = QueueProperties | TopicProperties  # what a driver send checks a message against
_IDS = ("message_id", "session_id", "partition_key", "reply_to_session_id")


def _problem(message: Outgoing, props: Sendable, header: int, size: int) -> str | None:
    """The first rule the message breaks, in ``send.frame._first_problem``'s order and words."""
    for name in _IDS:
        value = message.get(name)
        if value is not None and len(value) > MAX_ID_LENGTH:
            return (f"{name} is longer than {MAX_ID_LENGTH} characters: {value[:40]} (S2.2)")
    key, session = message.get("partition_key"), message.get("session_id")
    if key is not None and session is not None and key != session:
        return f"partition_key {key} differs from session_id {session} (S2.2)"
    problem = _entity_problem(message, props, size)
    if problem is not None:
        return problem
    if header > HEADER_LIMIT:
        return (f"MessageSizeExceeded: header of message {message['message_id']} exceeds "
                "64 KB (S2.4)")
    return None


def _entity_problem(message: Outgoing, props: Sendable, size: int) -> str | None:
    """The rules of this entity a message may break (its sessions, its size limit): the
    ones a forwarded message is checked by again."""
    if getattr(props, "requires_session", False) and message.get("session_id") is None:
        return (f"queue {props.name} requires sessions; message {message['message_id']} has "
                "no session_id (S10.1)")
    limit = message_limit(props.max_message_size_in_kilobytes)
    if size > limit:
        return (f"MessageSizeExceeded: message {message['message_id']} is {size} bytes; at "
                f"most {limit} (S2.4)")
    return None


def _time_to_live_ms(message: Outgoing) -> int | None:
    """The message's own time to live in ms, truncated (S8.1); None: the entity's."""
    ttl = message.get("time_to_live")
    if ttl is None:
        return None
    total = micros(ttl)
    return total // 1000 if total >= 0 else -((-total) // 1000)


def _lives_ms(own_ms: int | None, props: Sendable) -> int | None:
    """How long the message lives: its own time to live capped by the entity's (S8.1)."""
    if is_never(props.default_message_time_to_live):
        return own_ms
    cap = int(props.default_message_time_to_live.total_seconds() * 1000)
    return cap if own_ms is None else min(own_ms, cap)


def _expiry(active_from: datetime, lives_ms: int | None) -> datetime | None:
    """When the message expires (S8.1): at least a second after activation; a time to live
    past year 9999 (Python's last) is stored as the last instant, never reached."""
    if lives_ms is None:
        return None
    try:
        return active_from + timedelta(milliseconds=max(lives_ms, 1000))
    except OverflowError:
        return datetime.max.replace(tzinfo=active_from.tzinfo)


def _partition(message: Outgoing, props: Sendable, available: list[int],
               fenced: frozenset[int], spread: RoundRobin) -> int:
    """The key's partition (S4.1, S4.2), refused when unavailable (S4.4); else the next
    available partition round robin (S4.3)."""
    n = props.partition_count
    key = routing_key(message.get("session_id"), message.get("partition_key"),
                      message.get("message_id"), props.requires_duplicate_detection)
    if n > 1 and key is not None:
        routed = partition_for(key, n)
        if routed in fenced:
            raise refusal(f"PartitionUnavailable: a message keyed {key} routes to unavailable "
                          f"partition {routed} (S4.4)")
        return routed
    return spread.pick(available)


def _available(props: Sendable, fenced: frozenset[int]) -> list[int]:
    available = [p for p in range(props.partition_count) if p not in fenced]
    if not available:
        raise PartitionUnavailableError(
            f"all {props.partition_count} partitions are unavailable; nothing can be sent "
            "(S14.2)")
    return available


def inbox_rows(messages: Sequence[Outgoing], props: Sendable,
               fenced: frozenset[int],
               spread: RoundRobin, send_id: str) -> list[dict[str, Any]]:
    """The inbox rows of ``messages`` (``prepare_send``'s), or the first rule one breaks
    raised as the Spark send raises it; nothing is stored either way."""
    available = _available(props, fenced)
    now = utcnow()
    rows = []
    for index, message in enumerate(messages):
        values = message.get("application_properties")
        variant = None if values is None else encode_object(values)
        header = 0 if values is None else len(to_json(values).encode("utf-8"))
        header += sum(len(message[n].encode("utf-8")) for n in STRING_PROPERTIES
                      if message.get(n) is not None)
        size = len(message["body"]) + header
        problem = _problem(message, props, header, size)
        if problem is not None:
            raise refusal(problem)
        ttl_ms = _time_to_live_ms(message)
        lives_ms = _lives_ms(ttl_ms, props)
        scheduled: datetime | None = message.get("scheduled_enqueue_time_utc")
        active_from = max(now, scheduled or now)
        rows.append({
            "partition_id": _partition(message, props, available, fenced, spread),
            "segment": int(now.timestamp()) // SEGMENT_SECONDS,
            "send_id": send_id, "batch_index": index,
            **{n: message.get(n) for n in STRING_PROPERTIES},
            "time_to_live_ms": ttl_ms, "scheduled_enqueue_time_utc": scheduled,
            "application_properties": None if variant is None else {
                "value": variant[0], "metadata": variant[1]},
            "body": message["body"], "size_in_bytes": size, "enqueued_time_utc": now,
            "expires_at_utc": _expiry(active_from, lives_ms),
            "enqueued_sequence_number": 0, "hop_count": 0, "targets": None,
        })
    return rows


def forwarded_rows(messages: Sequence[Mapping[str, Any]], props: Sendable,
                   fenced: frozenset[int], spread: RoundRobin, send_id: str
                   ) -> list[dict[str, Any]]:
    """The inbox rows of a forwarding batch (source inbox rows, each with its
    ``sequence_number``), as ``prepare_send(forwarded=True)`` makes them from
    ``engine.forward.job._outgoing``: every property and the size kept (S13.2), the first
    entity's number carried (S3.3), one more hop, the time to live counted again from now
    and capped by this entity (S8.1); checked again only by this entity's rules."""
    available = _available(props, fenced)
    now = utcnow()
    segment = int(now.timestamp()) // SEGMENT_SECONDS
    rows = []
    for index, message in enumerate(messages):
        problem = _entity_problem(message, props, int(message["size_in_bytes"]))
        if problem is not None:
            raise refusal(problem)
        scheduled: datetime | None = message["scheduled_enqueue_time_utc"]
        rows.append({
            "partition_id": _partition(message, props, available, fenced, spread),
            "segment": segment, "send_id": send_id, "batch_index": index,
            **{n: message[n] for n in STRING_PROPERTIES},
            "time_to_live_ms": message["time_to_live_ms"],
            "scheduled_enqueue_time_utc": scheduled,
            "application_properties": message["application_properties"],
            "body": message["body"], "size_in_bytes": message["size_in_bytes"],
            "enqueued_time_utc": now,
            "expires_at_utc": _expiry(max(now, scheduled or now),
                                      _lives_ms(message["time_to_live_ms"], props)),
            "enqueued_sequence_number": carried_sequence(
                message["enqueued_sequence_number"], int(message["sequence_number"])),
            "hop_count": next_hop(message["hop_count"]), "targets": None,
        })
    return rows


def result_of(rows: Sequence[Mapping[str, Any]], send_id: str, version: int | None = None
              ) -> SendResult:
    """What a send of ``rows`` stored (in inbox commit ``version``)."""
    return SendResult(count=len(rows), send_id=send_id,
                      size_in_bytes=sum(int(r["size_in_bytes"]) for r in rows),
                      version=version)


def commit_once(inbox: Inbox, quota: Quota, name: str, app_id: str, version: int,
                rows_for: Callable[[str], list[dict[str, Any]]]) -> bool:
    """Commit the rows ``rows_for(send_id)`` makes in one append on the driver, at most once
    per ``(app_id, version)`` and not at all once the inbox holds a later version of
    ``app_id`` (Delta's ``txn``; a streaming sink's query and batch, decision 024). True:
    committed now; False: committed before, nothing done (checked first, so a replay is
    not refused by what changed since)."""
    if not inbox.commits_here():
        raise InvalidOperationError(
            f"{name}: its inbox is not a local Delta table this process can commit to; "
            "send with send_dataframe instead (decision 024)")
    if inbox.holds_transaction(app_id, version):
        return False
    send_id = f"{app_id}-{version}"
    rows = rows_for(send_id)
    size = sum(int(r["size_in_bytes"]) for r in rows)
    quota.check(size)
    done = inbox.append_once(rows, send_id, (app_id, version)) if rows else True
    if done is None:
        raise StorageConflictError(
            f"{name}: the send of {send_id} could not be committed on the driver; nothing "
            "was stored: it is tried again with the batch")
    if done:
        quota.add(size)
    return done
