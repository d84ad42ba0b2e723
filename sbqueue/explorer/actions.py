"""What the explorer's buttons do, each through the engine's or the clients' own operation
(so every rule and every error is theirs): resubmit dead-lettered messages, purge, send a
test message, enable or disable an entity. Each returns what it did in one line; bad input
raises the engine's error (``ServiceBusError``) before anything is changed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sbqueue.client.message import ServiceBusMessage
from sbqueue.client.receiver import MAX_DELETE
from sbqueue.core.clock import utcnow
from sbqueue.core.names import subscription_parts
from sbqueue.core.properties import EntityStatus
from sbqueue.core.subqueues import SubQueue
from sbqueue.engine.forward.job import DEFAULT_BATCH, Forwarder
from sbqueue.exceptions import InvalidOperationError
from sbqueue.explorer.model import kind_of

if TYPE_CHECKING:
    from sbqueue.client import ServiceBusClient
    from sbqueue.management import ServiceBusAdministrationClient

__all__ = ["ACTIONS", "Action", "Tools"]

RESUBMIT_LIMIT = 100_000


@dataclass(frozen=True)
class Tools:
    """The clients an action works with (one namespace)."""

    admin: ServiceBusAdministrationClient
    client: ServiceBusClient


@dataclass(frozen=True)
class Action:
    """One button: its name, the question the confirmation asks, the form fields it
    takes, and what runs once confirmed."""

    name: str
    title: str
    fields: tuple[str, ...]
    run: Callable[[Tools, str, dict[str, str]], str]

    def question(self, path: str, form: dict[str, str]) -> str:
        given = ", ".join(f"{k} = {form[k]!r}" for k in self.fields if form.get(k))
        return f"{self.title} on {path}" + (f" ({given})" if given else "") + "?"


def resubmit(tools: Tools, path: str, form: dict[str, str]) -> str:
    """Dead-lettered messages the predicate selects back to the queue (a subscription's to
    its topic), exactly once, as the resubmit job does (decision 010)."""
    where = form.get("where", "").strip() or "true"
    parts = subscription_parts(path)
    home = path if parts is None else parts[0]
    result = Forwarder(tools.admin.namespace, path, DEFAULT_BATCH).resubmit(
        where, home, RESUBMIT_LIMIT)
    return f"resubmitted {result.forwarded} dead-lettered message(s) of {path} to {home}"


def purge(tools: Tools, path: str, form: dict[str, str]) -> str:
    """Every unlocked message of the main queue or its dead-letter queue removed, in
    batches of 4,000 (S5.7)."""
    lane = form.get("sub_queue", "main")
    if lane not in ("main", "dead_letter"):
        raise InvalidOperationError(f"sub_queue={lane!r}: main or dead_letter")
    _not_topic(tools, path, "purge")
    target = SubQueue.DEAD_LETTER.path(path) if lane == "dead_letter" else path
    entity = tools.admin.namespace.entity(target)
    before, total = utcnow(), 0
    while removed := entity.delete_messages(MAX_DELETE, before):
        total += removed
    return f"purged {total} message(s) from {target}"


def send_test(tools: Tools, path: str, form: dict[str, str]) -> str:
    """One message to a queue or topic, with the body (and session id) given."""
    kind = kind_of(tools.admin, path)
    if kind == "subscription":
        raise InvalidOperationError(
            f"{path} is a subscription: send to its topic (S15.1)")
    message = ServiceBusMessage(form.get("body", ""), session_id=form.get("session_id") or None,
                                content_type=form.get("content_type") or None,
                                application_properties={"sent_by": "sbqueue explorer"})
    sender = (tools.client.get_queue_sender(path) if kind == "queue"
              else tools.client.get_topic_sender(path))
    with sender:
        sender.send_messages(message)
    return f"sent one message to {path}"


def set_status(tools: Tools, path: str, form: dict[str, str]) -> str:
    """The entity's status set to Active or Disabled (or Send/ReceiveDisabled, S16.1)."""
    wanted = form.get("status", "")
    try:
        status = EntityStatus(wanted)
    except ValueError:
        choices = ", ".join(s.value for s in EntityStatus)
        raise InvalidOperationError(f"status={wanted!r}: one of {choices} (S16.1)") from None
    kind, admin = kind_of(tools.admin, path), tools.admin
    topic, sub = subscription_parts(path) or (path, "")
    update: dict[str, Callable[[], Any]] = {
        "queue": lambda: admin.update_queue(admin.get_queue(path), status=status),
        "topic": lambda: admin.update_topic(admin.get_topic(path), status=status),
        "subscription": lambda: admin.update_subscription(
            topic, admin.get_subscription(topic, sub), status=status),
    }
    update[kind]()
    return f"{path} is now {status.value}"


def _not_topic(tools: Tools, path: str, what: str) -> None:
    if kind_of(tools.admin, path) == "topic":
        raise InvalidOperationError(
            f"{path} is a topic: {what} one of its subscriptions (S15.1)")


ACTIONS = {a.name: a for a in (
    Action("resubmit", "Resubmit dead-lettered messages", ("where",), resubmit),
    Action("purge", "Purge messages", ("sub_queue",), purge),
    Action("send", "Send a test message", ("body", "session_id", "content_type"), send_test),
    Action("status", "Set the status", ("status",), set_status),
)}
"""Every action by the name its form posts."""
