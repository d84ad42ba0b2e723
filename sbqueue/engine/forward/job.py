"""Auto-forwarding (SPEC S13): move a queue's or subscription's messages to its
``forward_to``, and its dead-letter queue's to ``forward_dead_lettered_messages_to``.

A batch takes three commits, each safe to repeat (decision 010):

1. **claim** - a receive of the source's head that puts the picked messages in the
   ``transfer`` lane under one batch token, leased for the entity's lock duration (one
   guarded MERGE, as any receive: concurrent steps cannot claim a message twice);
2. **write** - one append to the destination with send id ``fwd-<token>``, made with Delta's
   idempotent write options (``txnAppId``): however often it is run, it commits once;
3. **release** - one guarded MERGE at the source: forwarded rows are deleted, the ones that
   cannot go (5th hop, destination missing or disabled, S13.3) move to the transfer
   dead-letter queue.

A step killed anywhere leaves its rows in the transfer lane under their token; any later
step finds them once the lease ran out and repeats 2 and 3. Nothing is lost, nothing
written twice (S13.4).

Messages still in the inbox go by window where the ledger is local (``engine.forward.window``,
decision 017): the same three commits, with one ledger row per partition instead of one
per message, and no MERGE. The receive path above takes what a window may not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.forwarding import (
    FORWARD_SEND_PREFIX,
    MAX_HOPS,
    Source,
    batch_token,
    claim_outcome,
    claim_valid,
    destination_of,
    release_outcome,
    release_valid,
    source_of,
    transfer_reason,
)
from sbqueue.core.names import SUBSCRIPTIONS_SEGMENT
from sbqueue.core.properties import EntityStatus, SubscriptionProperties
from sbqueue.core.subqueues import SubQueue
from sbqueue.core.transitions import ACTIVE, Lane
from sbqueue.engine.forward import window as forward_window
from sbqueue.engine.forward import window_rows
from sbqueue.engine.forward.window import ForwardWindow
from sbqueue.engine.receive.attempt import ReceiveResult, with_bodies
from sbqueue.engine.receive.on_spark import receive_once
from sbqueue.engine.receive.ranges import materialize_lapsed
from sbqueue.engine.schema import LEDGER_COLUMNS, LOCATOR, ledger_row
from sbqueue.engine.settle.apply import Applied, apply_by_sequence
from sbqueue.engine.storage_guard import storage_failure
from sbqueue.exceptions import (
    InvalidOperationError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
)
from sbqueue.store.guarded import retry_conflicts

if TYPE_CHECKING:
    from sbqueue.engine.entity import Entity
    from sbqueue.engine.namespace import Namespace
    from sbqueue.engine.topics.topic import Topic

__all__ = ["ForwardResult", "Forwarder", "forward_namespace", "forwarding_sources"]

log = logging.getLogger(__name__)
DEFAULT_BATCH = 100_000  # a batch is ~45 Spark jobs whatever its size (decision 010)
_RELEASE_ROWS = ("sequence_number long, _token string, _reason string, "
                 "_description string")
Crash = Callable[[str], None]  # tests: called after each commit of a batch, and as its
# destination write starts ("writing")


@dataclass
class ForwardResult:
    """What a step did at one source (or summed over several)."""

    forwarded: int = 0
    transfer_dead_lettered: int = 0
    batches: int = 0
    resumed: int = 0  # batches a killed step had left in the transfer lane
    error: str | None = None  # its storage failed: the step went on to the next source

    def add(self, other: ForwardResult) -> ForwardResult:
        return ForwardResult(self.forwarded + other.forwarded,
                             self.transfer_dead_lettered + other.transfer_dead_lettered,
                             self.batches + other.batches, self.resumed + other.resumed)


def _no_crash(_: str) -> None:
    return None


class Forwarder:
    """Forwarding steps over one source entity (a queue or subscription path)."""

    def __init__(self, namespace: Namespace, path: str, batch: int = DEFAULT_BATCH,
                 crash: Crash | None = None) -> None:
        self.namespace = namespace
        self.path = path
        self.batch = batch
        self.crash = crash or _no_crash
        self.source = namespace.entity(path)

    def _entity(self, source: str) -> Entity:
        if source == Source.MAIN:
            return self.source
        return self.namespace.entity(SubQueue.DEAD_LETTER.path(self.path))

    def _target(self, source: str) -> str | None:
        props = self.source.props
        return props.forward_to if source == Source.MAIN \
            else props.forward_dead_lettered_messages_to

    def step(self, max_batches: int | None = None) -> ForwardResult:
        """Finish batches left by killed steps, then move messages until the source is
        empty (or ``max_batches`` were moved)."""
        result = self.resume()
        for source in (Source.MAIN, Source.DEAD_LETTER):
            while self._target(source) and (max_batches is None
                                            or result.batches < max_batches):
                moved = self._next(source, batch_token(source))
                if moved is None:
                    break
                result = result.add(moved)
        return result

    def _next(self, source: str, token: str) -> ForwardResult | None:
        """One batch: a window of the inbox head where one can be claimed, else through
        the receive path (as many as the window claim left to it); None: nothing to move."""
        limit = self.batch
        if source == Source.MAIN:
            got = self._claim_windows()
            if got is not None and got.windows:
                return self._move_windows(got.windows, resumed=False)
            if got is not None:
                if not got.for_receive:
                    return None
                limit = got.for_receive
        if not self._claim(source, token, limit):
            return None
        return self._move(token, resumed=False)

    def resume(self) -> ForwardResult:
        """Finish the batches killed steps left (their lease ran out)."""
        self.source._reload()
        result = ForwardResult()
        windows = window_rows.leftover_windows(self.source, utcnow())
        for _, found in sorted(windows.items()):
            result = result.add(self._move_windows(found, resumed=True))
        for token in self._leftovers():
            result = result.add(self._move(token, resumed=True))
        return result

    def resubmit(self, where: str, destination: str, limit: int) -> ForwardResult:
        """Move dead-lettered messages matching ``where`` (SQL over the entity's view) to
        ``destination``, exactly once: claimed into the transfer lane by sequence number,
        then written and released like a forwarding batch."""
        result = self.resume()
        self.namespace.sendable(destination)  # exists now, or a clear error
        dead = self._entity(Source.DEAD_LETTER)
        try:
            chosen = [int(r[0]) for r in self.source.messages().where(
                (F.col("sub_queue") == SubQueue.DEAD_LETTER.view_name) & F.expr(where)).select(
                "sequence_number").orderBy("sequence_number").limit(limit).collect()]
        except Exception as exc:  # a predicate Spark cannot read: one line
            raise InvalidOperationError(
                f"--where {where!r}: {str(exc).splitlines()[0][:200]}") from None
        for start in range(0, len(chosen), self.batch):
            token = batch_token(Source.RESUBMIT, destination)
            self._claim_numbers(dead, chosen[start:start + self.batch], token)
            result = result.add(self._move(token, resumed=False))
        return result

    def _claim_numbers(self, dead: Entity, numbers: list[int], token: str) -> None:
        now = utcnow()

        def claim() -> Applied:
            return apply_by_sequence(
                dead.ledger, [(seq, None) for seq in numbers],
                (Lane.DEAD_LETTER,), claim_valid(now),
                claim_outcome(token, now + dead.props.lock_duration))

        retry_conflicts(claim, what=f"resubmit claim at {dead.path}")

    # -- 1. claim ----------------------------------------------------------------------------
    def _claim_windows(self) -> forward_window.Claim | None:
        """Windows of the main queue's inbox head, claimed on the driver; None where the
        receive path claims (not decidable here, or a destination that is missing or
        disabled: that path transfer-dead-letters message by message). Each attempt draws
        its own token: windows an attempt committed before an error reported as a conflict
        are another batch (finished by a later step), never written under this one's."""
        entity = self.source
        if entity.props.status in (EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED):
            return forward_window.Claim([], 0)  # a disabled source holds its messages (S16.1)
        destination = self._destination(self._target(Source.MAIN))
        if destination is None or destination.props.status in (
                EntityStatus.DISABLED, EntityStatus.SEND_DISABLED):
            return None
        fenced = self.namespace.catalog.fenced(entity.props.entity_id)  # S14.2
        available = [p for p in range(entity.partitions) if p not in fenced]

        if not available:
            return forward_window.Claim([], 0)  # every partition unavailable (S14.2)

        def attempt() -> forward_window.Claim | None:
            now, token = utcnow(), batch_token(Source.MAIN)
            ctx = replace(entity.make_attempt(available, 0, 0, peek_lock=True).ctx, now=now,
                          transfer_token=token, locked_until=now + entity.props.lock_duration)
            return forward_window.claim(entity, token, self.batch, ctx, available)

        got = retry_conflicts(attempt, what=f"forwarding window claim at {entity.path}")
        if got is not None and got.windows:
            self.crash("claimed")
        return got

    def _claim(self, source: str, token: str, limit: int) -> int:
        """Move up to ``limit`` messages of the head into the transfer lane under ``token``."""
        entity = self._entity(source)
        if entity.props.status in (EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED):
            return 0  # a disabled source holds its messages (S16.1)
        fenced = self.namespace.catalog.fenced(entity.props.entity_id)  # S14.2
        available = [p for p in range(entity.partitions) if p not in fenced]
        if source == Source.MAIN:
            materialize_lapsed(entity, available, utcnow())  # returned messages go too

        def attempt() -> ReceiveResult:
            a = entity.make_attempt(available, limit, limit, peek_lock=True)
            now = utcnow()
            ctx = replace(a.ctx, now=now, transfer_token=token,
                          locked_until=now + entity.props.lock_duration)
            return receive_once(entity.ledger, entity.inbox, replace(a, ctx=ctx), entity.lane)

        claimed = retry_conflicts(attempt, what=f"forwarding claim at {entity.path}").count
        if claimed:
            self.crash("claimed")
        return claimed

    def _leftovers(self) -> list[str]:
        """Tokens of batches in the transfer lane whose lease ran out: their step died
        (read on the driver where it can be, no Spark job)."""
        now = utcnow()
        here = self.source.ledger.scan_here(
            {"lane": [Lane.TRANSFER]}, ["row_type", "lock_token", "locked_until_utc"],
            lambda r: r["row_type"] == "m" and r["locked_until_utc"] <= now)
        if here is not None:
            return sorted({str(r["lock_token"]) for r in here})
        rows = (self.source.ledger.messages(
                    (F.col("lane") == Lane.TRANSFER)
                    & (F.col("locked_until_utc") <= F.lit(now).cast("timestamp")))
                .select("lock_token").distinct().collect())
        return sorted(str(r[0]) for r in rows)

    def _batch(self, token: str) -> DataFrame:
        """The batch's messages with their bodies (read once: checkpointed)."""
        ledger = self.source.ledger.messages(
            (F.col("lane") == Lane.TRANSFER) & (F.col("lock_token") == token)).localCheckpoint()
        locators = sorted({(int(r[0]), int(r[1]), str(r[2]))
                           for r in ledger.select(*LOCATOR[:3]).distinct().collect()})
        held = ReceiveResult(handed=ledger, locators=locators, count=len(locators),
                             left={}, committed=True)
        return with_bodies(self.source.inbox, held).localCheckpoint()

    # -- 2. write, 3. release ----------------------------------------------------------------
    def _move(self, token: str, resumed: bool) -> ForwardResult:
        rows = self._batch(token)
        meta = rows.select("sequence_number", "hop_count").collect()
        if not meta:
            return ForwardResult()
        source = source_of(token)
        target = destination_of(token) if source == Source.RESUBMIT else self._target(source)
        destination = self._destination(target)
        missing = destination is None
        disabled = not missing and destination is not None and \
            destination.props.status in (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED)
        hops = source != Source.RESUBMIT  # a resubmission is no hop (S13.3)
        reasons = {int(r[0]): transfer_reason(r[1] if hops else 0, missing, disabled)
                   for r in meta}
        going = any(why is None for why in reasons.values())
        if going and destination is not None and not (resumed and self._written(destination,
                                                                                token)):
            # the rows without a reason, selected by the same rule in Spark (no literal list)
            movable = rows.where(F.coalesce(F.col("hop_count"), F.lit(0)) < MAX_HOPS) \
                if hops else rows
            try:
                self.crash("writing")
                destination.send_dataframe(
                    _outgoing(movable, hops),
                    send_id=FORWARD_SEND_PREFIX + token, forwarded=True,
                    idempotent=True)
            except (MessagingEntityDisabledError, MessagingEntityNotFoundError) as exc:
                why = transfer_reason(0, isinstance(exc, MessagingEntityNotFoundError), True)
                reasons = dict.fromkeys(reasons, why)
        self.crash("written")
        self._release(token, reasons, target)
        self.crash("released")
        failed = sum(1 for why in reasons.values() if why is not None)
        log.info("forwarded %d, transfer-dead-lettered %d from %s to %s", len(reasons) - failed,
                 failed, self.path, target)
        return ForwardResult(len(reasons) - failed, failed, 1, int(resumed))

    def _move_windows(self, windows: list[ForwardWindow], resumed: bool) -> ForwardResult:
        """Write a window batch to the forward-to entity (idempotent: once per token) and
        release it; a destination missing or disabled by now gets the messages in the
        transfer dead-letter queue instead (S13.3)."""
        token, target = windows[0].token, self._target(Source.MAIN)
        destination = self._destination(target)
        dead: list[dict[str, object]] = []
        try:
            if destination is None:
                raise MessagingEntityNotFoundError(f"{target} does not exist")
            self._write_windows(destination, windows, token, resumed)
        except (MessagingEntityDisabledError, MessagingEntityNotFoundError) as exc:
            why = transfer_reason(0, isinstance(exc, MessagingEntityNotFoundError), True)
            dead = self._dead_rows(windows, why, target)
        self.crash("written")
        retry_conflicts(lambda: window_rows.release(self.source, windows, dead),
                        what=f"forwarding window release at {self.path}")
        self.crash("released")
        moved = sum(w.count for w in windows)
        log.info("forwarded %d, transfer-dead-lettered %d from %s to %s by window",
                 moved - len(dead), len(dead), self.path, target)
        return ForwardResult(moved - len(dead), len(dead), 1, int(resumed))

    def _write_windows(self, destination: Entity | Topic, windows: list[ForwardWindow],
                       token: str, resumed: bool) -> None:
        """The destination append of a window batch, at most once per token: on the driver
        where both tables are local and the destination a queue (no Spark job), else one
        Spark append with ``txnAppId``."""
        send_id = FORWARD_SEND_PREFIX + token
        if resumed and self._written(destination, token):
            return  # before any check of the destination: what is written is released
        rows = window_rows.window_messages(self.source, windows)
        self.crash("writing")
        if rows is not None and destination.send_forwarded(rows, send_id):
            return
        destination.send_dataframe(
            _outgoing(window_rows.window_rows(self.source, windows), True),
            send_id=send_id, forwarded=True, idempotent=True)

    def _dead_rows(self, windows: list[ForwardWindow], why: str | None, target: str | None
                   ) -> list[dict[str, object]]:
        """Transfer dead-letter rows of every message of the windows (S13.3)."""
        rows = window_rows.window_rows(self.source, windows)
        kept = [c for c in LEDGER_COLUMNS if c in rows.columns and c not in ("state", "lane")]
        return [ledger_row(**r.asDict(), lane=Lane.TRANSFER_DEAD_LETTER, row_type="m",
                           row_version=1, state=ACTIVE, delivery_count=0,
                           dead_letter_reason=why, dead_letter_error_description=(
                               f"could not forward to {target!r}: {why} (S13.3)"))
                for r in rows.select(*kept).collect()]

    def _destination(self, name: str | None) -> Entity | Topic | None:
        if not name:
            return None
        try:
            return self.namespace.sendable(name)
        except MessagingEntityNotFoundError:
            return None

    def _written(self, destination: Entity | Topic, token: str) -> bool:
        """Whether a resumed batch reached its destination before its step died: its
        append's ``txn`` in the destination's log (read on the driver), else its rows by
        their send id (statistics on ``send_id`` skip the other files; this also holds
        after Delta dropped an old ``txn``)."""
        send_id = FORWARD_SEND_PREFIX + token
        if destination.inbox.holds_transaction(send_id):
            return True
        return destination.inbox.of_send(send_id).limit(1).count() > 0

    def _release(self, token: str, reasons: dict[int, str | None], target: str | None) -> None:
        wanted = [(seq, token, why, None if why is None else
                   f"could not forward to {target!r}: {why} (S13.3)")
                  for seq, why in sorted(reasons.items())]
        retry_conflicts(lambda: apply_by_sequence(
            self.source.ledger, wanted, (Lane.TRANSFER,),
            release_valid(), release_outcome(), schema=_RELEASE_ROWS),
            what=f"forwarding release at {self.path}")


def _outgoing(rows: DataFrame, hop: bool) -> DataFrame:
    """The destination send of a batch: every property kept (S13.2), the first entity's
    sequence number carried (S3.3), one more ``hop``; in the source's order."""
    return rows.orderBy("sequence_number").select(
        "body", "message_id", "session_id", "partition_key", "correlation_id", "subject",
        "content_type", "to", "reply_to", "reply_to_session_id", "scheduled_enqueue_time_utc",
        "application_properties", "size_in_bytes",
        "time_to_live_ms",
        F.coalesce(F.nullif(F.col("enqueued_sequence_number"), F.lit(0)),
                   F.col("sequence_number")).alias("enqueued_sequence_number"),
        (F.coalesce(F.col("hop_count"), F.lit(0)) + int(hop)).alias("hop_count"))


def forwarding_sources(namespace: Namespace) -> list[str]:
    """Paths of every queue and subscription that forwards (main or dead-letter queue)."""
    catalog = namespace.catalog
    paths = [q.name for q in catalog.entities("queue")
             if q.forward_to or q.forward_dead_lettered_messages_to]
    for sub in catalog.entities("subscription"):
        assert isinstance(sub, SubscriptionProperties)
        if sub.forward_to or sub.forward_dead_lettered_messages_to:
            paths.append(f"{sub.topic_name}/{SUBSCRIPTIONS_SEGMENT}/{sub.name}")
    return paths


def forward_namespace(namespace: Namespace, paths: list[str] | None = None,
                      batch: int = DEFAULT_BATCH) -> dict[str, ForwardResult]:
    """One forwarding step at each of ``paths`` (default: every forwarding source)."""
    return {path: _isolated(namespace, path, batch)
            for path in (paths if paths is not None else forwarding_sources(namespace))}


def _isolated(namespace: Namespace, path: str, batch: int) -> ForwardResult:
    """A step at ``path``; a source or destination whose storage fails is reported, and the
    step goes on with the other sources (issue 21 point 4)."""
    try:
        return Forwarder(namespace, path, batch).step()
    except Exception as exc:
        failure = storage_failure(path, "forwarding", exc)
        if failure is None:
            raise
        log.error("%s", failure)
        return ForwardResult(error=str(failure))

