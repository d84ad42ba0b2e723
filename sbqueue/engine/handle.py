"""What every operation on one entity starts from: its tables, its definition, its checks.

An ``EntityHandle`` is one queue or subscription (or one of their sub-queues): the inbox it
reads and the ledger it commits (a subscription reads its topic's inbox, decision 009),
the partition board its threads share, the size quota, and the checks an operation makes
before it changes anything (status S16.1, fenced partitions S14.2, sends to a queue only
S7.2/S15.2). It holds no operation: those live in their modules (``send.ops``,
``receive.ops``, ``settle.ops``, ``settle.by_number``, ``reads.peek``) and take a handle, and
``entity.Entity`` is the facade that names them. So an operation module may name this
one, and this one names none of them.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.duplicates import dedupe_window
from sbqueue.core.names import SUBSCRIPTIONS_SEGMENT
from sbqueue.core.properties import (
    EntityStatus,
    QueueProperties,
    SubscriptionProperties,
    TopicProperties,
)
from sbqueue.core.routing import RoundRobin
from sbqueue.core.subqueues import SubQueue
from sbqueue.core.transitions import Lane, ReceiveContext
from sbqueue.engine.catalog import Catalog
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.partitions import board_for
from sbqueue.engine.quota import Quota
from sbqueue.engine.reads.tally import Held, held_here, per_partition, tally, tally_by_partition
from sbqueue.engine.reads.view import (
    count_messages,
    count_partitions,
    inbox_bound,
    last_commit,
    messages,
)
from sbqueue.engine.receive.attempt import Attempt, lock_stamp
from sbqueue.engine.send.frame import SendResult
from sbqueue.engine.send.numbers import send_numbers
from sbqueue.engine.storage_guard import storage_guarded
from sbqueue.exceptions import (
    InvalidOperationError,
    MessagingEntityDisabledError,
    PartitionUnavailableError,
)
from sbqueue.store.watch import Watch

__all__ = ["EntityHandle", "Home", "Sendable"]


class Sendable(Protocol):
    """What a send goes through: a queue's entity or a topic (``Namespace.sendable``)."""

    def send_dataframe(self, df: DataFrame) -> SendResult: ...


class Home(Protocol):
    """What an entity asks of its namespace (``engine.namespace.Namespace`` is one): the
    session, the catalog, and the other entities by path. A protocol, so that the
    operations need not import the namespace that imports them."""

    spark: SparkSession
    catalog: Catalog

    def entity(self, path: str) -> Any: ...

    def sendable(self, name: str) -> Sendable: ...


@storage_guarded
class EntityHandle:
    """One queue or subscription (or one of their sub-queues): tables, definition, checks.
    A subscription reads its copies from its topic's inbox (``target``: its entity id)
    through a ledger of its own (decision 009)."""

    def __init__(self, namespace: Home, props: QueueProperties | SubscriptionProperties,
                 sub_queue: SubQueue = SubQueue.MAIN) -> None:
        self.namespace = namespace
        self.props = props
        self.sub_queue = sub_queue
        self.lane = sub_queue.lane
        self.spark = namespace.spark
        self.topic: TopicProperties | None = None
        self.target: str | None = None
        inbox_owner = props.entity_id
        if isinstance(props, SubscriptionProperties):
            self.topic = namespace.catalog.get("topic", props.topic_name)
            self.target = props.entity_id
            inbox_owner = self.topic.entity_id
        self.inbox = Inbox(self.spark, namespace.catalog.data_path(inbox_owner, "inbox"))
        self.ledger = Ledger(self.spark, namespace.catalog.data_path(props.entity_id, "ledger"))
        self.partitions = props.partition_count
        self.board = board_for(self.ledger.path, self.partitions)
        owner = self.topic if self.topic is not None else self.props
        self.quota = Quota(self.path, lambda: int(getattr(owner, "max_size_in_megabytes", 1024)),
                           self.partitions, lambda: inbox_bound(self.inbox),
                           lambda: int(self.counts()["size_in_bytes"]))
        self.fenced: frozenset[int] = frozenset()  # unavailable partitions (S14.2)
        # Unkeyed client sends, round robin from a random partition (S4.3).
        self.spread = RoundRobin(self.partitions, random.randrange(max(1, self.partitions)))
        self._records: bool | None = None  # completes as records (``records_allowed``)

    @property
    def name(self) -> str:
        """The entity path without sub-queue: ``q`` or ``topic/Subscriptions/sub``."""
        if isinstance(self.props, SubscriptionProperties):
            return f"{self.props.topic_name}/{SUBSCRIPTIONS_SEGMENT}/{self.props.name}"
        return self.props.name

    @property
    def path(self) -> str:
        """The entity path as Service Bus spells it (``q``, ``q/$DeadLetterQueue``)."""
        return self.sub_queue.path(self.name)

    @property
    def inbox_path(self) -> str:
        return self.inbox.path

    @property
    def ledger_path(self) -> str:
        return self.ledger.path

    @property
    def dedupe(self) -> timedelta | None:
        """The duplicate detection window: the queue's, or a subscription's topic's (S11)."""
        return dedupe_window(self.topic if self.topic is not None else self.props)

    @property
    def max_message_kilobytes(self) -> int | None:
        """The message size limit: the queue's, or a subscription's topic's (S2.4)."""
        owner = self.topic if self.topic is not None else self.props
        return getattr(owner, "max_message_size_in_kilobytes", None)

    def main(self) -> EntityHandle:
        """This entity's main queue (itself when it is one)."""
        return self if self.lane == Lane.MAIN else EntityHandle(self.namespace, self.props)

    def _reload(self) -> None:
        props = self.props
        if isinstance(props, SubscriptionProperties):
            self.props = self.namespace.catalog.get("subscription", props.name,
                                                    props.topic_name)
        else:
            self.props = self.namespace.catalog.get_queue(props.name)

    # -- checks: before anything is changed ------------------------------------------------
    def check_status(self, operation: str) -> None:
        """S16.1: refuse a send to a Disabled or SendDisabled entity, a receive or settle on
        a Disabled or ReceiveDisabled one. Reads the current definition (a status change
        by the administrator takes effect at once)."""
        self._reload()
        self.fenced = self.namespace.catalog.fenced(self.props.entity_id)
        blocked = {"send": (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED),
                   "receive": (EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED)}[operation]
        if self.props.status in blocked:
            raise MessagingEntityDisabledError(
                f"{self.path} is {self.props.status.value}: {operation} refused (S16.1)")

    def require_available(self, partitions: list[int], operation: str) -> None:
        """S14.2: an operation on an unavailable partition fails (checked after
        ``check_status`` read the current fence)."""
        down = sorted(set(partitions) & self.fenced)
        if down:
            raise PartitionUnavailableError(
                f"{self.path}: partition(s) {down} are unavailable; {operation} refused (S14.2)")

    def check_sendable(self) -> QueueProperties:
        """S7.2, S15.2: only a queue's main queue takes sends, when its status allows them;
        the queue's properties."""
        if self.sub_queue.is_dead_letter:
            raise InvalidOperationError(
                f"{self.name}/{self.sub_queue.view_name}: nothing can be sent to a "
                "dead-letter queue (S7.2)")
        if not isinstance(self.props, QueueProperties):
            raise InvalidOperationError(
                f"{self.name}: a subscription receives what its topic's rules give it; send "
                "to the topic (S15.2)")
        self.check_status("send")
        return self.props

    # -- what a receive decides with -------------------------------------------------------
    def context(self, peek_lock: bool) -> ReceiveContext:
        """The rules' inputs for a receive now (``core.transitions``)."""
        now = utcnow()
        return ReceiveContext(
            now=now, locked_until=lock_stamp(now, self.props.lock_duration,
                                             self.board.lock_grace()),
            peek_lock=peek_lock, max_delivery_count=self.props.max_delivery_count,
            dead_letter_on_expiry=self.props.dead_lettering_on_message_expiration,
            main_queue=self.lane == Lane.MAIN, requires_session=self.props.requires_session)

    def make_attempt(self, partitions: list[int], share: int, total: int, peek_lock: bool,
                     pass_to: tuple[tuple[int, int], ...] = ()) -> Attempt:
        """One receive's question to these partitions (``engine.receive.attempt.Attempt``)."""
        return Attempt(
            partitions=partitions, share=share, total=total, ctx=self.context(peek_lock),
            lock_duration=self.props.lock_duration,
            latest_version=self.inbox.version() if self.lane == Lane.MAIN else 0,
            pass_to=pass_to, dedupe=self.dedupe, target=self.target)

    @property
    def records_allowed(self) -> bool:
        """Whether a complete may be a completion record (decision 011): in the main queue
        (other lanes are re-locked by paths that do not read records; a session's renewal
        and release fold its records, ``Sessions._move_message_locks``), on a ledger at
        Serializable isolation (ledgers created before it keep keyed deletes). Read once."""
        if self._records is None:
            self._records = (self.lane == Lane.MAIN
                             and self.ledger.isolation_level() == "Serializable")
        return self._records

    # -- reads: never commit ---------------------------------------------------------------
    def messages(self, internal: bool = False) -> DataFrame:
        """Every message of the entity (all sub-queues), as its Spark SQL view shows it;
        ``internal`` adds each message's ``_send_id`` and ``_batch_index``."""
        return messages(self.inbox, self.ledger, internal, self.dedupe, self.target)

    def none(self) -> DataFrame:
        """An empty receive's answer: the view's columns, no row."""
        return self.messages().limit(0).drop("sub_queue")

    def watch(self) -> Watch | None:
        """A watch of the tables whose commits can make a message available here (the
        inbox it reads, the ledger it commits), for a receiver waiting on an empty entity;
        None where they are not read on the driver."""
        return Watch.watched([self.inbox.path, self.ledger.path])

    def version(self) -> int:
        """The entity's latest version: its inbox's (one per send commit), what ``as_of``
        and ``replay`` take."""
        return self.inbox.version()

    def sequence_numbers(self, send_id: str) -> list[int]:
        """The sequence numbers of the messages one send stored, in batch-index order: send
        order for a send made ``in_send_order`` (the client's and a transaction's, S3.4),
        grouped by partition for another DataFrame send. From the heads of its partitions
        (``engine.send.numbers``), else from the view."""
        if self.dedupe is None and self.target is None:
            found = send_numbers(self.inbox, self.ledger, send_id)
            if found is not None:
                return found
        rows = (self.messages(internal=True).where(F.col("_send_id") == send_id)
                .orderBy("_batch_index").select("sequence_number").collect())
        return [int(r[0]) for r in rows]

    def counts(self) -> dict[str, int]:
        """Message counts by kind, summed over partitions, and ``size_in_bytes`` (S16.2):
        read on the driver where it can be (``engine.reads.tally``), else through the view."""
        forwarding = bool(self.props.forward_to)
        held = self._held_here()
        if held is None:
            return count_messages(self.messages(), forwarding)
        return tally(((h[1], h[2], 1, h[3]) for h in held), forwarding)

    def partition_tallies(self) -> dict[int, dict[str, int]]:
        """``counts()`` of each partition: what the explorer's chart and the metrics show
        (on the driver where it can be, else one query through the view)."""
        forwarding = bool(self.props.forward_to)
        held = self._held_here()
        if held is None:
            return count_partitions(self.messages(), self.partitions, forwarding)
        return tally_by_partition(((h[0], h[1], h[2], 1, h[3]) for h in held),
                                  self.partitions, forwarding)

    def _held_here(self) -> list[Held] | None:
        if self.dedupe is not None:  # the view drops duplicates: Spark decides which
            return None
        return held_here(self.inbox, self.ledger, self.partitions, self.target, utcnow())

    def accessed_at(self) -> datetime | None:
        """When a message was last sent, received or settled (S16.2)."""
        return last_commit([self.inbox, self.ledger])

    def partition_counts(self) -> dict[int, int]:
        """Messages per partition (all states and sub-queues)."""
        held = self._held_here()
        if held is not None:
            return per_partition(held, self.partitions)
        rows = self.messages().groupBy("partition_id").count().collect()
        return {p: 0 for p in range(self.partitions)} | {r[0]: r[1] for r in rows}
