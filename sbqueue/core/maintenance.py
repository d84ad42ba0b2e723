"""What the maintenance step may remove, as pure functions (S8.2, S16.3, decision 010).

An inbox segment (one partition, one hour of sends) can go once every reader is past it
and nothing still points at it; an entity can go once it has been idle longer than its
``auto_delete_on_idle``. The engine gathers the facts (versions, cursors, ledger
references, the last user commit) and asks these functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sbqueue.core.durations import is_never

__all__ = [
    "MAINTENANCE_OPERATIONS",
    "PAST_COMMIT",
    "Segment",
    "SegmentPlan",
    "idle_too_long",
    "plan_segments",
]

PAST_COMMIT = 1 << 62  # a cursor index past every row of its commit (engine.receive.attempt)
# Delta operations the maintenance step itself commits: they are not an entity's use.
MAINTENANCE_OPERATIONS = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END", "DELETE"})


@dataclass(frozen=True)
class Segment:
    """An inbox segment as read: its partition, hour, newest row's commit version and
    file count."""

    partition: int
    segment: int
    newest_version: int
    files: int


@dataclass
class SegmentPlan:
    """Per partition, the segments to drop and the ones to compact (kept: still
    referenced by a ledger row, but read only through the snapshot from now on)."""

    drop: dict[int, list[int]] = field(default_factory=dict)
    compact: dict[int, list[int]] = field(default_factory=dict)


def plan_segments(segments: Iterable[Segment], cursors: dict[int, tuple[int, int]] | None,
                  referenced: set[tuple[int, int]], now: datetime,
                  keep_for: timedelta, segment_seconds: int) -> SegmentPlan:
    """Which segments every reader has passed: per partition, ``cursors`` holds the
    oldest reader's (version, index); a segment is passed when its newest row is from an
    older commit, or from that commit with the cursor past the commit's end (index
    ``PAST_COMMIT``). ``cursors`` None: there is no reader (a topic without subscriptions),
    so every segment is passed. Only hours over by more than ``keep_for`` (the duplicate
    detection window: its history stays, S11). Dropped: not ``referenced`` by any ledger
    row; compacted: still referenced, in several files."""
    plan = SegmentPlan()
    newest_closed = int((now - keep_for).timestamp()) // segment_seconds - 1
    for seg in segments:
        cursor = None if cursors is None else cursors.get(seg.partition, (-1, -1))
        passed = cursor is None or seg.newest_version < cursor[0] or (
            seg.newest_version == cursor[0] and cursor[1] == PAST_COMMIT)
        if not passed or seg.segment > newest_closed:
            continue
        if (seg.partition, seg.segment) not in referenced:
            plan.drop.setdefault(seg.partition, []).append(seg.segment)
        elif seg.files > 1:
            plan.compact.setdefault(seg.partition, []).append(seg.segment)
    for lists in (plan.drop, plan.compact):
        for partition in lists:
            lists[partition].sort()
    return plan


def idle_too_long(last_use: datetime | None, now: datetime, auto_delete_on_idle: timedelta
                  ) -> bool:
    """S16.3: an entity unused for longer than ``auto_delete_on_idle`` is deleted (never,
    when that is unlimited; an entity never used counts from its creation, ``last_use``)."""
    if is_never(auto_delete_on_idle) or last_use is None:
        return False
    return now - last_use > auto_delete_on_idle
