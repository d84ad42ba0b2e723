"""A receive of a few messages, decided on the driver (decision 011, step 2b).

The Spark path of ``engine.receive.attempt`` ranks candidates with window functions, checkpoints
the decision, summarises it in a second query and MERGEs from the checkpoint: 15 Spark jobs
and seconds of planning for a receive of one message. A receive of at most
``SMALL_RECEIVE`` messages instead collects what it decides on, narrow and bounded, and
applies the same rules on plain rows:

1. the ledger rows of the lane that can change: cursors, commit markers, completion
   records and the first message rows not locked (more: the Spark path decides); one
   top-k. A locked row a record completed is folded without a read (``_folds``);
2. the inbox rows after the cursors, in commit order, at most ``total + HEAD_ROWS`` of
   them, with their bodies: one collect (a top-k, no shuffle);
3. ``core.picking.pick`` and ``core.transitions.receive_outcome`` evaluated per row;
4. one guarded MERGE whose source is built on the driver (no job of its own).

The messages handed out are built from the rows already read: no body read after the
commit. What needs the Spark path (sessions, duplicate detection, forwarding claims,
maintenance's idle cursors, bulk receives) is not decided here, nor is a
receive whose bounded reads could hide what it should hand out: ``small_receive`` returns
None and the Spark path decides.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sbqueue.core.clock import utcnow
from sbqueue.core.expr import Row
from sbqueue.core.picking import pick
from sbqueue.core.sequence import counter_of, cursor_key, sequence_of
from sbqueue.core.transitions import (
    DELIVERABLE,
    RECORD_AT,
    Lane,
    cancel_valid,
    completed_by_record,
    receive_rules,
)
from sbqueue.engine.columns import to_sql
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.receive.attempt import (
    MAX_INDEX,
    WINDOW_VERSIONS,
    Attempt,
    Cursor,
    LapsedRanges,
    ReceiveResult,
    cursor_expect,
    cursors_of,
    merge_scope,
    pending_or_void,
    span_of,
)
from sbqueue.engine.receive.dedupe_here import without_duplicates_here
from sbqueue.engine.receive.handed import MESSAGE_COLUMNS, handed_frame, messages_here
from sbqueue.engine.receive.head import read_head
from sbqueue.engine.receive.ledger_slice import ledger_rows
from sbqueue.engine.receive.on_spark import receive_once
from sbqueue.engine.records import (
    Record,
    no_record_guard,
    record_rows,
    records_due,
    settled_record_deletes,
)
from sbqueue.engine.schema import (
    LEDGER_COLUMNS,
    LEDGER_KEYS,
    RECORD,
    WINDOW,
    ledger_match,
    ledger_row,
)
from sbqueue.store.driver import Pinned
from sbqueue.store.guarded import DELETE_IF, EXPECT_COLUMN, OP_COLUMN, apply_guarded
from sbqueue.store.thresholds import (
    HEAD_ROWS,
    SESSION_HEAD,
    SMALL_PASS,
    SMALL_RECEIVE,
)

__all__ = ["SMALL_RECEIVE", "NotCancellable", "available_here", "cancel", "cursor_row",
           "receive", "small_receive"]

# ``completed_by_record`` on the stored row, with the record's time and token from the fold
# row (``_folds``): the same rule receives and reads apply to rows they read.
FOLDED = to_sql(completed_by_record(), {
    "locked_until_utc": "t.locked_until_utc", RECORD_AT: "s.enqueued_time_utc"}) + \
    " AND t.lock_token <=> s.lock_token"
_NARROW_COLUMNS = ["message_id", "session_id", "enqueued_time_utc",
                   "scheduled_enqueue_time_utc", "expires_at_utc", "size_in_bytes"]


class NotCancellable(Exception):
    """Sequence numbers a cancel found but cannot remove (not scheduled, or already due):
    nothing was committed."""

    def __init__(self, seqs: list[int]) -> None:
        super().__init__(seqs)
        self.seqs = seqs


def decided_here(a: Attempt, lane: str) -> bool:
    """Whether a receive is small and plain enough to be decided on the driver."""
    asked = 0 < a.total <= SMALL_RECEIVE and not a.pass_to and not a.advance_idle
    passing = a.total == 0 and bool(a.pass_to) and lane == Lane.MAIN  # a cursor pass only
    # Maintenance's pass: expire what lies at the head and move idle cursors, hand out none.
    maintaining = a.total == 0 and a.advance_idle and not a.pass_to and lane == Lane.MAIN
    return ((asked or passing or maintaining) and (not a.sessions or lane == Lane.MAIN)
            and a.ctx.transfer_token is None
            and lane in (Lane.MAIN, Lane.DEAD_LETTER, Lane.TRANSFER_DEAD_LETTER))


def receive(ledger: Ledger, inbox: Inbox, a: Attempt, lane: str = Lane.MAIN
            ) -> ReceiveResult:
    """One receive attempt: on the driver when it is small and plain, else in Spark."""
    result = small_receive(ledger, inbox, a, lane)
    return result if result is not None else receive_once(ledger, inbox, a, lane)


def small_receive(ledger: Ledger, inbox: Inbox, a: Attempt, lane: str,
                  lapsed_first: bool = False) -> ReceiveResult | None:
    """Run one attempt decided on the driver, or None when it is not for the driver;
    raises StaleRead or a Delta conflict if it lost a race (as ``receive_once``), and with
    ``lapsed_first`` LapsedRanges where its ledger read finds range locks run out."""
    if not decided_here(a, lane):
        return None
    pinned = ledger.pin() if ledger.commits_here() else None  # decide and commit at one version
    try:
        return _decided(ledger, inbox, a, lane, lapsed_first, pinned)
    finally:
        if pinned is not None:
            pinned.release()


def _decided(ledger: Ledger, inbox: Inbox, a: Attempt, lane: str, lapsed_first: bool,
             pinned: Pinned | None) -> ReceiveResult | None:
    """``small_receive`` once its ledger is pinned (None: read and commit through Spark)."""
    # A maintenance pass reads a longer head, narrow: it hands nothing out.
    read = _read(ledger, inbox, a, lane, pinned, head=SMALL_PASS if a.advance_idle else 0,
                 bodies=not a.advance_idle)
    if read is None:
        return None
    if lapsed_first and read.lapsed:
        raise LapsedRanges()
    cursors, candidates, found = read.cursors, read.candidates, read.found
    complete_head, end = read.complete_head, read.end
    outcome = receive_rules(a.ctx)
    pick(candidates, outcome.pop(DELIVERABLE), a.share, a.total, len(a.partitions),
         random.randrange(1 << 16), dict(a.pass_to), frozenset(a.sessions))
    changes = [_decide(row, outcome) for row in candidates]
    if not complete_head and sum(1 for c in changes if c["_handed"]) < a.total:
        return None  # a cut head may hide deliverable rows of other partitions
    if a.cancel and not _cancelled(changes, a):
        return None  # a target not read or not passed: the two-step cancel decides
    writes = [c for c in changes if c[OP_COLUMN] is not None]
    rows_read = {(int(c["partition_id"]), int(c["sequence_number"]))
                 for c in changes if c["origin"] == "ledger"}
    if lane == Lane.MAIN:
        writes += _cursor_moves(changes, cursors, end, a, complete_head)
    written = {int(w["partition_id"]) for w in writes if lane in (w["lane"], w.get("_old_lane"))}
    found = records_due(found, written, a.ctx.now)  # the others wait: no file more for them
    writes += _guard_rows(changes) + settled_record_deletes(found, rows_read, lane, a.ctx.now)
    writes += _folds(found, rows_read, lane)
    return _commit(ledger, inbox, a, changes, writes, complete_head, pinned)


@dataclass(frozen=True)
class _Read:
    """What a receive decided on the driver reads: the cursors, the candidates (ledger rows
    not locked, then inbox rows after the cursors, numbered), the completion records, and
    whether the inbox head was read whole up to version ``end``; ``lapsed``: range locks
    of the main lane whose lock ran out were read too."""

    cursors: list[Cursor]
    candidates: list[dict[str, Any]]
    found: list[Record]
    complete_head: bool
    end: int
    lapsed: bool


def _read(ledger: Ledger, inbox: Inbox, a: Attempt, lane: str, pinned: Pinned | None,
          head: int = 0, bodies: bool = True) -> _Read | None:
    """The reads of a receive decided on the driver (``head``: inbox rows to read at
    least); None when the ledger holds more available rows than a small receive reads."""
    limit = max(a.total + HEAD_ROWS, SESSION_HEAD if a.sessions else 0, head)
    slice_rows = ledger_rows(ledger, a, lane, limit + len(a.cancel), pinned)
    if slice_rows is None:
        return None
    cursors = cursors_of(slice_rows, a.partitions)
    committed = frozenset(str(r["send_id"]) for r in slice_rows if r["row_type"] == "t")
    found = record_rows([r for r in slice_rows if r["row_type"] == RECORD])
    recorded = {(p, s, t): at for p, s, t, at in found}
    candidates = [_ledger_candidate(r, recorded) for r in slice_rows if r["row_type"] == "m"]
    complete_head, end = True, 0
    if lane == Lane.MAIN:
        start = min((c.version for c in cursors), default=0)
        end = min(a.latest_version, start + WINDOW_VERSIONS)
        if a.pass_to:  # every row up to each target, narrow: nothing is handed out
            counters = {c.partition: c.counter for c in cursors}
            limit = HEAD_ROWS + sum(max(0, counter_of(seq) - counters.get(p, 0))
                                    for p, seq in a.pass_to)
            if limit > SMALL_PASS:
                return None
        rows = _inbox_head(inbox, cursors, start, end, a, limit,
                           bodies=bodies and not a.pass_to)
        complete_head = len(rows) < limit
        kept = rows if a.dedupe is None else without_duplicates_here(inbox, rows, a, a.dedupe,
                                                                     end)
        if kept is None:
            return None
        candidates += _inbox_candidates(kept, cursors, committed, a)  # duplicates unnumbered
    lapsed = any(r["row_type"] == WINDOW for r in slice_rows)
    return _Read(cursors, candidates, found, complete_head, end, lapsed)


def available_here(ledger: Ledger, inbox: Inbox, a: Attempt) -> list[dict[str, Any]] | None:
    """The messages a receive of the main queue could hand out now (as
    ``engine.receive.attempt.deliverable_heads``: sessions with available messages are found
    here, S10.2), read on the driver: the first ``SESSION_HEAD`` inbox rows after the
    cursors, narrow. None where Spark must read: the ledger holds more than a small
    receive reads, or a cut head shows nothing available."""
    read = _read(ledger, inbox, a, Lane.MAIN, None, head=SESSION_HEAD, bodies=False)
    if read is None:
        return None
    ok = receive_rules(a.ctx)[DELIVERABLE]
    rows = [c for c in read.candidates
            if not c["_pending"] and not c["_void"] and ok(c) is True]
    return rows if rows or read.complete_head else None


def cancel(ledger: Ledger, inbox: Inbox, a: Attempt) -> bool:
    """Remove the scheduled messages ``a.cancel`` in one commit: the cursor passes those
    still in the inbox without storing them, and those in the ledger are deleted (S8.4).
    False when it cannot be decided on the driver (nothing committed); NotCancellable when
    one is not a scheduled message still waiting."""
    return small_receive(ledger, inbox, a, Lane.MAIN) is not None


def _cancelled(changes: list[dict[str, Any]], a: Attempt) -> bool:
    """Turn each target's change into its removal; False when a target was not read (or,
    in the inbox, not passed). Raises NotCancellable naming the targets not valid."""
    by_seq = {int(c["sequence_number"]): c for c in changes}
    valid = cancel_valid(a.ctx.now)
    refused = []
    for seq in a.cancel:
        change = by_seq.get(seq)
        if change is None or (change["origin"] == "inbox" and not change["_passed"]):
            return False
        if not valid.evaluate(change):
            refused.append(seq)
        elif change["origin"] == "inbox":
            change[OP_COLUMN] = None  # passed and never stored: gone
        else:
            change[OP_COLUMN] = "delete"  # guarded by the row version read
    if refused:
        raise NotCancellable(refused)
    return True


def _folds(found: list[Record], read: set[tuple[int, int]], lane: str) -> list[dict[str, Any]]:
    """For each completion record whose message row was not read (it is locked): delete
    that row if the record completed it (``completed_by_record``, checked in the MERGE on the
    row as it stands). One per message: the newest record's token, the likelier current."""
    newest: dict[tuple[int, int], Record] = {}
    for record in found:
        key = (record[0], record[1])
        if key not in read and (key not in newest or record[3] > newest[key][3]):
            newest[key] = record
    return [ledger_row(partition_id=partition, lane=lane, sequence_number=seq, row_type="m",
                       row_version=0, lock_token=token, enqueued_time_utc=at,
                       **{EXPECT_COLUMN: None, OP_COLUMN: DELETE_IF})
            for partition, seq, token, at in newest.values()]


def _inbox_head(inbox: Inbox, cursors: list[Cursor], start: int, end: int, a: Attempt,
                limit: int, bodies: bool = True) -> list[dict[str, Any]]:
    """The first ``limit`` inbox rows after the cursors, in commit order, whole (without
    ``bodies``: the columns a decision reads): ``receive.head.read_head``."""
    columns = MESSAGE_COLUMNS if bodies else _NARROW_COLUMNS
    here = read_head(inbox, cursors, (start, end), a, limit, columns)
    if bodies and a.sessions:  # bodies of the sessions' rows only: the rest are passed
        for row in here:
            if row["session_id"] not in a.sessions:
                row.update(dict.fromkeys(set(columns) - set(_NARROW_COLUMNS)))
    return here


def _ledger_candidate(row: dict[str, Any], recorded: dict[tuple[int, int, str], Any]
                      ) -> dict[str, Any]:
    token = row["lock_token"]
    key = (int(row["partition_id"]), int(row["sequence_number"]), str(token))
    return {**row, "origin": "ledger", "_commit_version": None, "_index": None,
            "_counter": None, "_p_version": None, "_pending": False, "_void": False,
            RECORD_AT: recorded.get(key) if token is not None else None}


def _inbox_candidates(head: list[dict[str, Any]], cursors: list[Cursor],
                      committed: frozenset[str], a: Attempt) -> list[dict[str, Any]]:
    """Head rows numbered after each partition's cursor counter, in commit order."""
    by_partition = {c.partition: c for c in cursors}
    ranks: dict[int, int] = {}
    out = []
    for r in head:
        partition = int(r["partition_id"])
        cursor = by_partition[partition]
        ranks[partition] = ranks.get(partition, 0) + 1
        counter = cursor.counter + ranks[partition]
        pending, void = pending_or_void(str(r["send_id"]), r["enqueued_time_utc"], committed,
                                        a.ctx.now)
        row = ledger_row(**{c: r[c] for c in LEDGER_COLUMNS if c in r})
        row.update({
            "sequence_number": sequence_of(partition, counter), "row_type": "m",
            "row_version": 0, "state": "Active", "delivery_count": 0, "lane": None,
            "origin": "inbox", "_commit_version": r["_commit_version"],
            "_index": r["batch_index"], "_counter": counter, "_p_version": cursor.p_version,
            "_pending": pending, "_void": void, RECORD_AT: None, "_message": r})
        out.append(row)
    return out


def _decide(row: dict[str, Any], outcome: Mapping[str, Callable[[Row], Any]]
            ) -> dict[str, Any]:
    """The row after ``receive_outcome`` (compiled), with what was read kept alongside."""
    row.update({"_new_token": str(uuid.uuid4()), "_old_lane": row["lane"],
                "_old_token": row["lock_token"], "_read_version": row["row_version"]})
    decided = {**row, **{name: rule(row) for name, rule in outcome.items()}}
    decided[EXPECT_COLUMN] = row["_read_version"] if row["origin"] == "ledger" else None
    return decided


def _guard_rows(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """"No completion record of this lock exists", for every locked row changed without a
    record read (as ``engine.receive.attempt._no_new_records``)."""
    return [no_record_guard(c["partition_id"], c["_old_lane"], c["sequence_number"],
                            c["_old_token"])
            for c in changes if c[OP_COLUMN] is not None and c["origin"] == "ledger"
            and c["_old_token"] is not None and c[RECORD_AT] is None]


def cursor_row(partition: int, version: int, index: int, counter: int, p_version: int
               ) -> dict[str, Any]:
    """The change moving a partition's cursor to inbox row (version, index), numbered
    ``counter``: guarded by the p row's version as read (``cursor_expect``)."""
    return ledger_row(partition_id=partition, lane=Lane.MAIN,
                      sequence_number=cursor_key(partition), row_type="p",
                      row_version=p_version + 1, cursor_version=version, cursor_index=index,
                      last_counter=counter,
                      **{EXPECT_COLUMN: cursor_expect(p_version), OP_COLUMN: "upsert"})


def _cursor_moves(changes: list[dict[str, Any]], cursors: list[Cursor], end: int, a: Attempt,
                  complete_head: bool) -> list[dict[str, Any]]:
    """p rows: each partition's cursor to the last inbox row passed; partitions without
    inbox rows past the window's end when the window stopped short of the newest commit
    (only when the head was read whole: a cut head says nothing of what lies beyond), or
    at all in a maintenance pass (``advance_idle``)."""
    moves = [cursor_row(c["partition_id"], c["_commit_version"], c["_index"], c["_counter"],
                    c["_p_version"]) for c in changes if c["_cursor_to"]]
    if complete_head and (end < a.latest_version or a.advance_idle):
        busy = {c["partition_id"] for c in changes if c["origin"] == "inbox"}
        moves += [cursor_row(c.partition, end, MAX_INDEX, c.counter, c.p_version)
                  for c in cursors
                  if c.partition not in busy and (c.version, c.position) < (end, MAX_INDEX)]
    return moves


def _commit(ledger: Ledger, inbox: Inbox, a: Attempt, changes: list[dict[str, Any]],
            writes: list[dict[str, Any]], complete_head: bool, pinned: Pinned | None
            ) -> ReceiveResult:
    handed = [c for c in changes if c["_handed"]]
    told, committed = None, False
    if writes:
        done = None if pinned is None else _rewrite(ledger, pinned, writes)
        if done is None:
            _merge(ledger, writes)
        committed = done is not False
        told = min(a.ctx.locked_until, utcnow() + a.lock_duration) if committed else None
    left = dict.fromkeys(a.partitions, 0)
    for c in changes:
        left[int(c["partition_id"])] = max(left[int(c["partition_id"])], int(c["_left"]))
    if not complete_head:  # what lies past a cut head is unknown
        left = {p: n for p, n in left.items() if n}
    return ReceiveResult(
        handed=lambda: handed_frame(ledger.spark, handed),
        locators=sorted({(int(c["partition_id"]), int(c["segment"]), str(c["send_id"]))
                         for c in handed if c["segment"] is not None}),
        count=len(handed), left=left, committed=committed,
        locked_until=told if a.ctx.peek_lock else None,
        messages=messages_here(inbox, handed, copy=False),
        index_span=span_of([c["batch_index"] for c in handed]))


def _merge(ledger: Ledger, writes: list[dict[str, Any]]) -> None:
    """Commit ``writes`` in one guarded MERGE scoped to the rows they touch."""
    spans: dict[tuple[int, str], tuple[int, int]] = {}
    for w in writes:
        key = (int(w["partition_id"]), str(w.get("_old_lane") or w["lane"]))
        seq = int(w["sequence_number"])
        low, high = spans.get(key, (seq, seq))
        spans[key] = (min(low, seq), max(high, seq))
    ledger.merge_changes(
        merge_scope([(p, lane, lo, hi) for (p, lane), (lo, hi) in spans.items()]),
        writes, FOLDED)


def _rewrite(ledger: Ledger, pinned: Pinned, writes: list[dict[str, Any]]) -> bool | None:
    """Commit ``writes`` by rewriting the ledger partitions and lanes they touch, on the
    driver, from the version the receive read (decision 011, step 4): the MERGE's guards and
    folds applied to the rows as read (``apply_guarded``), and the commit fails if anything
    committed since touched those partitions. True: committed. False: the writes change no
    row (folds of completion records whose rows are gone already, guards that hold), so
    nothing is committed: a record lives a minute after its fold, and each receive of that
    minute would otherwise commit the same no-op. None (nothing done) where the partitions
    hold more rows than a driver read takes: the MERGE commits instead."""
    scope = sorted({(int(w["partition_id"]), str(lane)) for w in writes
                    for lane in (w["lane"], w.get("_old_lane") or w["lane"])})
    stored = pinned.rows({"partition_id": sorted({p for p, _ in scope}),
                          "lane": sorted({lane for _, lane in scope})}, None,
                         lambda r: (r["partition_id"], r["lane"]) in scope)
    if stored is None:
        return None
    rows = apply_guarded(stored, writes, LEDGER_KEYS, LEDGER_COLUMNS, ledger_match, _folded)
    changed = _changed(stored, rows)
    if not changed:
        return False
    ledger.rewrite_here(pinned, [{"partition_id": p, "lane": lane} for p, lane in changed],
                        [r for r in rows if (r["partition_id"], r["lane"]) in changed])
    return True


def _changed(stored: list[dict[str, Any]], rows: list[dict[str, Any]]
             ) -> list[tuple[Any, Any]]:
    """The (partition, lane) groups whose rows ``apply_guarded`` changed (it keeps each
    untouched row itself, in order). Only those are rewritten: a fold of a completion
    record whose row is gone changes nothing, and rewriting its partition anyway made every
    receive rewrite each partition completed in the last minute (new files to write, and
    to read again on the next receive)."""
    def grouped(found: list[dict[str, Any]]) -> dict[tuple[Any, Any], list[int]]:
        groups: dict[tuple[Any, Any], list[int]] = {}
        for row in found:
            groups.setdefault((row["partition_id"], row["lane"]), []).append(id(row))
        return groups
    before, after = grouped(stored), grouped(rows)
    return sorted(key for key in before.keys() | after.keys()
                  if before.get(key) != after.get(key))


def _folded(stored: Mapping[str, Any], fold: Mapping[str, Any]) -> bool:
    """``FOLDED`` on plain rows: the record of a fold row completed the stored row."""
    return completed_by_record().evaluate({
        "locked_until_utc": stored["locked_until_utc"],
        RECORD_AT: fold["enqueued_time_utc"]}) is True and stored["lock_token"] == fold[
        "lock_token"]
