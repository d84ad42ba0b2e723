"""An entity as it stood at a past version or time, and its messages sent again to another
entity (issue 22 point 4): Delta time travel over the entity's two tables, read through the
SELECT of its view (``engine.reads.view.messages_sql``).

An entity is two tables: its inbox (sends append to it) and its ledger (receives,
settlements and cursors write it). A *version* of the entity is a version of its inbox, one
send commit; the ledger is read as it stood when that commit was made, so the states shown
(completed, deferred, dead-lettered) are those of that moment. A *time* picks, in each
table, the last commit made at or before it.

Maintenance removes what old versions need: a vacuum deletes data files that only old
versions name, and the log drops commits past its retention. A version that can no longer
be read is refused with the oldest one that still can (checked on the driver for local
folders; elsewhere the read itself fails).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sbqueue.core.sizes import STRING_PROPERTIES
from sbqueue.engine.reads.view import messages_sql
from sbqueue.engine.send.frame import SendResult
from sbqueue.exceptions import InvalidOperationError

if TYPE_CHECKING:
    from sbqueue.engine.handle import EntityHandle

__all__ = ["REPLAYED_FROM", "Moment", "as_of", "moment", "replay"]

# The application property a replayed message carries: the entity and version it came from.
REPLAYED_FROM = "x-sbqueue-replayed-from"


@dataclass(frozen=True)
class Moment:
    """The versions of an entity's tables that make it up at one point, and that point's
    time (schedules due by then show as active)."""

    inbox: int
    ledger: int
    at: datetime


def _last_at_or_before(commits: list[tuple[int, datetime]], at: datetime) -> int | None:
    found = [version for version, stamp in commits if stamp <= at]
    return found[-1] if found else None


def _pinned(version: int, at: datetime, ledger: list[tuple[int, datetime]]) -> Moment:
    """The inbox ``version`` made at ``at``, with the ledger as it stood then (its first
    version where it had no commit yet)."""
    found = _last_at_or_before(ledger, at)
    return Moment(version, ledger[0][0] if found is None else found, at)


def moment(entity: EntityHandle, when: int | datetime) -> Moment:
    """The versions that make up ``entity`` at ``when`` (an inbox version or a time); a
    version it never had, a time before it existed, or a version no longer readable is
    refused with what can be read."""
    inbox = entity.inbox.commits()
    ledger = entity.ledger.commits()
    first, last = inbox[0], inbox[-1]
    if isinstance(when, datetime):
        at = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        version = _last_at_or_before(inbox, at)
        if version is None:
            raise InvalidOperationError(
                f"{entity.path} did not exist at {at.isoformat()}: its oldest version still "
                f"in the log, {first[0]}, was made at {first[1].isoformat()}")
    elif isinstance(when, int) and not isinstance(when, bool):
        stamps = dict(inbox)
        if when not in stamps:
            raise InvalidOperationError(
                f"{entity.path} has no version {when} in its log: versions {first[0]} "
                f"to {last[0]} can be asked for")
        version, at = when, stamps[when]
    else:
        raise InvalidOperationError(
            f"as of {when!r}: give an entity version (int) or a time (datetime)")
    found = _pinned(version, at, ledger)
    _check_readable(entity, found, inbox, ledger)
    return found


def _check_readable(entity: EntityHandle, wanted: Moment, inbox: list[tuple[int, datetime]],
                    ledger: list[tuple[int, datetime]]) -> None:
    def readable(m: Moment) -> bool | None:
        inbox_ok = entity.inbox.readable(m.inbox)
        if inbox_ok is None:
            return None
        return inbox_ok and bool(entity.ledger.readable(m.ledger))

    if readable(wanted) is not False:
        return  # readable, or only the read itself can tell (not a local folder)
    # the oldest readable version after the one asked for: a vacuum makes the versions
    # older than its horizon unreadable, so past the one asked for, readability only grows
    # with the version (the latest is always readable)
    low, high = [v for v, _ in inbox].index(wanted.inbox) + 1, len(inbox) - 1
    while low < high:
        mid = (low + high) // 2
        if readable(_pinned(*inbox[mid], ledger)):
            high = mid
        else:
            low = mid + 1
    oldest, made = inbox[low]
    raise InvalidOperationError(
        f"{entity.path} as of version {wanted.inbox} ({wanted.at.isoformat()}) can no longer "
        f"be read: maintenance vacuumed the files it needs (or the log dropped its commits); "
        f"the oldest version still readable is {oldest} ({made.isoformat()})")


def as_of(entity: EntityHandle, when: int | datetime) -> DataFrame:
    """The entity's messages as its view showed them at ``when`` (every sub-queue; peek:
    nothing locked or changed)."""
    return _read(entity, moment(entity, when))


def _read(entity: EntityHandle, found: Moment) -> DataFrame:
    return entity.spark.sql(messages_sql(
        entity.inbox.at(found.inbox), entity.ledger.at(found.ledger), dedupe=entity.dedupe,
        target=entity.target, now=found.at))


def _origin_properties(origin: str) -> Column:
    """The message's application properties plus ``REPLAYED_FROM`` (replacing an earlier
    replay's), still a VARIANT object."""
    props = F.col("application_properties").cast("map<string,variant>")
    kept = F.map_filter(F.coalesce(props, F.expr("CAST(map() AS map<string,variant>)")),
                        lambda k, _: k != F.lit(REPLAYED_FROM))
    stamp = F.create_map(F.lit(REPLAYED_FROM), F.lit(origin).cast("variant"))
    return F.to_variant_object(F.map_concat(kept, stamp))


def replay(entity: EntityHandle, when: int | datetime, destination: str,
           where: str | None = None) -> SendResult:
    """Send the messages ``entity`` held at ``when`` (those matching ``where``, SQL over
    its view) to ``destination`` (a queue, or a topic whose rules choose), in one commit:
    new sequence numbers, the original message ids and properties, ``REPLAYED_FROM``
    naming the origin. Schedules are not replayed: the copies are active at once."""
    found = moment(entity, when)
    target = entity.namespace.sendable(destination)  # exists now, or a clear error
    rows = _read(entity, found)
    if where:
        try:
            rows = rows.where(F.expr(where))
            rows.schema  # noqa: B018 - resolves the predicate now (Spark Connect is lazy)
        except Exception as exc:  # a predicate Spark cannot read: one line
            raise InvalidOperationError(
                f"--where {where!r}: {str(exc).splitlines()[0][:200]}") from None
    origin = f"{entity.path}@{found.inbox}"
    out = rows.orderBy("sequence_number").select(
        "body", *STRING_PROPERTIES,
        (F.col("time_to_live_ms") / 1000.0).alias("time_to_live"),
        _origin_properties(origin).alias("application_properties"))
    return target.send_dataframe(out)
