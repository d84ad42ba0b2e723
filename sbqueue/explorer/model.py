"""What the explorer's pages show, read with the engine's own reads (on the driver where
the local executor serves, so a page starts no Spark job): the namespace's entities with
their counts, one entity's partitions, properties, rules and sessions, and peeked
messages. Reads only: nothing here commits. Plain frozen data for the templates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from sbqueue.client.convert import to_received
from sbqueue.client.message import ServiceBusReceivedMessage
from sbqueue.core.names import SUBSCRIPTIONS_SEGMENT, subscription_parts
from sbqueue.core.properties import EntityDefinition
from sbqueue.core.rules import describe_filter
from sbqueue.core.subqueues import SubQueue
from sbqueue.engine.entity import Entity
from sbqueue.exceptions import InvalidOperationError, MessagingEntityNotFoundError
from sbqueue.explorer.bodies import ShownBody, shown_body

if TYPE_CHECKING:
    from sbqueue.management import ServiceBusAdministrationClient

__all__ = ["EntityDetail", "EntityRow", "MessagePage", "ShownMessage", "entity_counts",
           "entity_detail", "message_page", "one_message", "overview", "parse_after"]

PAGE = 25
"""Messages a page of the peek shows, unless it asks for another number up to MAX_PAGE."""
MAX_PAGE = 250

_SYSTEM = ("message_id", "sequence_number", "partition_id", "state", "enqueued_time_utc",
           "scheduled_enqueue_time_utc", "expires_at_utc", "time_to_live", "delivery_count",
           "locked_until_utc", "session_id", "partition_key", "correlation_id",
           "content_type", "subject", "to", "reply_to", "reply_to_session_id",
           "dead_letter_reason", "dead_letter_error_description", "dead_letter_source")


@dataclass(frozen=True)
class EntityRow:
    """One line of the namespace page. A topic holds no message of its own but the
    scheduled ones (S8.5): its other counts are None."""

    path: str
    kind: str
    status: str
    partitions: int
    requires_session: bool
    active: int | None
    scheduled: int | None
    dead_letter: int | None
    transfer: int | None
    size_in_bytes: int


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    partition_id: int
    locked_until_utc: datetime | None
    state_updated_utc: datetime | None
    state: ShownBody


@dataclass(frozen=True)
class EntityDetail:
    row: EntityRow
    properties: list[tuple[str, str]]
    per_partition: dict[int, dict[str, int]]
    rules: list[tuple[str, str, str]] = field(default_factory=list)
    sessions: list[SessionRow] = field(default_factory=list)
    subscriptions: list[EntityRow] = field(default_factory=list)


@dataclass(frozen=True)
class ShownMessage:
    sequence_number: int
    state: str
    enqueued_time_utc: datetime | None
    system: list[tuple[str, str]]
    application: list[tuple[str, str, str]]
    body: ShownBody


@dataclass(frozen=True)
class MessagePage:
    path: str
    dead_letter: bool
    messages: list[ShownMessage]
    after: str | None
    """The cursor of the next page (None when this one was not full)."""


def overview(admin: ServiceBusAdministrationClient) -> list[EntityRow]:
    """Every queue, then every topic followed by its subscriptions, with counts."""
    ns = admin.namespace
    rows = [_row(ns.entity(q.name), "queue", q) for q in admin.list_queues()]
    for topic in admin.list_topics():
        subs = _subscription_rows(admin, topic.name)
        rows.append(_topic_row(admin, topic, subs))
        rows += subs
    return rows


def _subscription_rows(admin: ServiceBusAdministrationClient, topic: str) -> list[EntityRow]:
    return [_row(admin.namespace.entity(f"{topic}/{SUBSCRIPTIONS_SEGMENT}/{s.name}"),
                 "subscription", s) for s in admin.list_subscriptions(topic)]


def _row(entity: Entity, kind: str, props: EntityDefinition,
         counts: Mapping[str, int] | None = None) -> EntityRow:
    """An entity's line, with its ``counts()`` (read here unless given)."""
    counts = entity.counts() if counts is None else counts
    return EntityRow(path=entity.path, kind=kind, status=_status(props),
                     partitions=entity.partitions,
                     requires_session=bool(getattr(props, "requires_session", False)),
                     active=counts["active"], scheduled=counts["scheduled"],
                     dead_letter=counts["dead_letter"], transfer=counts["transfer"],
                     size_in_bytes=counts["size_in_bytes"])


def _topic_row(admin: ServiceBusAdministrationClient, topic: EntityDefinition,
               subs: list[EntityRow]) -> EntityRow:
    handle = admin.namespace.topic(topic.name)
    return EntityRow(path=topic.name, kind="topic", status=_status(topic),
                     partitions=handle.partitions, requires_session=False, active=None,
                     scheduled=handle.scheduled_count(), dead_letter=None, transfer=None,
                     size_in_bytes=sum(s.size_in_bytes for s in subs))


def _status(props: EntityDefinition) -> str:
    status = getattr(props, "status", "Active")
    return str(getattr(status, "value", status))


def kind_of(admin: ServiceBusAdministrationClient, path: str) -> str:
    """queue, topic or subscription; MessagingEntityNotFoundError when none is there."""
    parts = subscription_parts(path)
    if parts is not None:
        admin.get_subscription(*parts)
        return "subscription"
    if any(q.name.lower() == path.lower() for q in admin.list_queues()):
        return "queue"
    if any(t.name.lower() == path.lower() for t in admin.list_topics()):
        return "topic"
    raise MessagingEntityNotFoundError(
        f"no queue or topic {path!r} in {admin.namespace.root} (S1.1)")


def entity_counts(admin: ServiceBusAdministrationClient, path: str) -> EntityDetail:
    """An entity's counts, whole and per partition (one read of its messages: the whole is
    the partitions' sum), and its properties; a topic's, its subscriptions. What the
    entity page refreshes."""
    kind = kind_of(admin, path)
    if kind == "topic":
        topic = admin.get_topic(path)
        subs = _subscription_rows(admin, topic.name)
        return EntityDetail(_topic_row(admin, topic, subs), _properties(topic), {},
                            subscriptions=subs)
    entity = admin.namespace.entity(path)
    tallies = entity.partition_tallies()
    whole = {k: sum(t[k] for t in tallies.values()) for k in next(iter(tallies.values()))}
    return EntityDetail(_row(entity, kind, entity.props, whole), _properties(entity.props),
                        tallies)


def entity_detail(admin: ServiceBusAdministrationClient, path: str) -> EntityDetail:
    """An entity's page: ``entity_counts``, and a subscription's rules and a session
    entity's sessions."""
    counts = entity_counts(admin, path)
    rules, sessions = [], []
    if counts.row.kind == "subscription":
        rules = [(r.name, describe_filter(r.filter),
                  r.action.sql_expression if r.action else "")
                 for r in admin.list_rules(*(subscription_parts(path) or (path, "")))]
    if counts.row.requires_session:
        sessions = _sessions(admin.namespace.entity(path))
    return replace(counts, rules=rules, sessions=sessions)


def _properties(props: EntityDefinition) -> list[tuple[str, str]]:
    return [(k, "" if v is None else str(v)) for k, v in props.to_json().items()]


def _sessions(entity: Entity) -> list[SessionRow]:
    return [SessionRow(r["session_id"], r["partition_id"], r["locked_until_utc"],
                       r["state_updated_utc"],
                       shown_body(None if r["session_state"] is None
                                  else bytes(r["session_state"])))
            for r in entity.sessions.listed()]


def _lane(admin: ServiceBusAdministrationClient, path: str, dead_letter: bool) -> Entity:
    kind = kind_of(admin, path)
    if kind == "topic":
        raise InvalidOperationError(
            f"{path} is a topic: peek one of its subscriptions (a topic keeps no messages "
            "of its own, S15.1)")
    return admin.namespace.entity(SubQueue.DEAD_LETTER.path(path) if dead_letter else path)


def parse_after(text: str | None) -> tuple[datetime, int] | None:
    """The next-page cursor ``<enqueued time ISO>|<sequence number>``; a bad one is an
    error naming it."""
    if not text:
        return None
    when, sep, seq = text.partition("|")
    try:
        if not sep:
            raise ValueError(text)
        return datetime.fromisoformat(when), int(seq)
    except ValueError:
        raise InvalidOperationError(
            f"after={text!r} is not <enqueued time>|<sequence number>") from None


def message_page(admin: ServiceBusAdministrationClient, path: str, *, dead_letter: bool,
                 from_sequence: int | None = None, after: str | None = None,
                 count: int = PAGE) -> MessagePage:
    """A page of peeked messages (S9: no lock, no change): from a sequence number on
    (within its partition, S9.3), or after the last message of the page before."""
    entity = _lane(admin, path, dead_letter)
    rows = entity.peek_rows(count, from_sequence=from_sequence, after=parse_after(after))
    messages = [to_received(r) for r in rows]
    last = messages[-1] if len(messages) == count else None
    cursor = (f"{last.enqueued_time_utc.isoformat()}|{last.sequence_number}"
              if last is not None and last.enqueued_time_utc is not None else None)
    return MessagePage(path, dead_letter, [shown(m) for m in messages], cursor)


def one_message(admin: ServiceBusAdministrationClient, path: str, dead_letter: bool,
                sequence_number: int) -> ShownMessage | None:
    """One message by its sequence number, peeked; None when it is not there (any more)."""
    entity = _lane(admin, path, dead_letter)
    rows = entity.peek_rows(1, from_sequence=sequence_number)
    found = [to_received(r) for r in rows]
    if not found or found[0].sequence_number != sequence_number:
        return None
    return shown(found[0])


def shown(message: ServiceBusReceivedMessage) -> ShownMessage:
    """A message's properties as text and its body as ``shown_body`` shows it."""
    system = [(name, _text(getattr(message, name, None))) for name in _SYSTEM]
    props = message.application_properties or {}
    application = [(str(k), _text(v), type(v).__name__) for k, v in props.items()]
    return ShownMessage(message.sequence_number, _text(message.state),
                        message.enqueued_time_utc,
                        [(k, v) for k, v in system if v != ""], application,
                        shown_body(message.body_bytes, message.content_type))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Enum):
        return value.name.replace("_", " ").title().replace(" ", "") if isinstance(
            value.value, int) else str(value.value)
    return str(value)
