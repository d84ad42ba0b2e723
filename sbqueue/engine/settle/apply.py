"""Settling locked messages. A client's complete: one completion record (a blind append,
``engine.records``); one other settlement: one keyed DELETE or UPDATE whose condition is
the rule; many: find the rows by (partition, sequence number), check each lock, apply
``core.transitions.settle_outcome`` as one projection, commit one guarded MERGE.

Rows are found through a literal scope (partition, lanes, sequence range), so Delta reads
only the files that can hold them (partition pruning and min/max data skipping) and the
commit conflicts only with work on those partitions (S14.1).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sbqueue.core.clock import utcnow
from sbqueue.core.expr import Expr
from sbqueue.core.sequence import partition_of
from sbqueue.core.transitions import (
    RECORD_AT,
    Outcome,
    SettleContext,
    completed_by_record,
    settle_outcome,
    settle_valid,
)
from sbqueue.engine.columns import project, to_column, to_sql
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.receive.attempt import as_aware, merge_scope
from sbqueue.engine.receive.handed import handed_frame
from sbqueue.engine.records import CLOCK_MARGIN, RECORD_BUDGET
from sbqueue.engine.schema import LEDGER_TYPES, LOCATOR
from sbqueue.engine.settle.by_number_here import Decided, apply_here
from sbqueue.store.driver import Pinned
from sbqueue.store.guarded import EXPECT_COLUMN

PAIRS = "sequence_number long, _token string"

__all__ = ["Applied", "SettleResult", "apply_by_sequence", "complete_by_records",
           "settle_here", "settle_keyed", "settle_once"]


@dataclass
class SettleResult:
    """Rows settled; sequence numbers whose lock was no longer valid (expired or another
    token, S6.6); and those no longer in the entity at all (settled before)."""

    settled: int = 0
    lock_lost: list[int] = field(default_factory=list)
    already_settled: list[int] = field(default_factory=list)
    locked_until: datetime | None = None  # a renewal's new locked-until time (S6.5)


@dataclass(frozen=True)
class Applied:
    """What ``apply_by_sequence`` did: the valid and invalid numbers, the missing ones, the
    changed rows (checkpointed) and where their inbox rows are."""

    valid: list[int]
    invalid: list[int]
    missing: list[int]
    changes: DataFrame | Callable[[], DataFrame] | None  # a callable: built if asked
    locators: list[tuple[int, int, str]]
    rows: list[dict[str, Any]] | None = None  # the changed rows, where decided on the driver


def _scope(seqs: list[int], lanes: tuple[str, ...]) -> str:
    by_partition: dict[int, list[int]] = {}
    for seq in seqs:
        by_partition.setdefault(partition_of(seq), []).append(seq)
    return merge_scope([(p, lane, min(numbers), max(numbers))
                        for p, numbers in by_partition.items() for lane in lanes])


def apply_by_sequence(ledger: Ledger, wanted: list[tuple[Any, ...]], lanes: tuple[str, ...],
                      valid: Expr, outcome: Outcome, require_all: bool = False,
                      schema: str = PAIRS) -> Applied:
    """Find the ledger rows of (sequence number, caller's token) pairs in ``lanes``, keep
    those for which ``valid`` holds, apply ``outcome`` to them in one guarded MERGE over
    their partitions only; with ``require_all``, commit nothing unless every pair is valid
    (an operation that fails has no partial effect). Raises StaleRead or a Delta conflict
    if a row changed meanwhile. ``schema``: of the tuples, when they carry more per-row
    values for ``outcome`` than the pair.
    """
    names = [part.split()[0] for part in schema.split(",")]  # the tuple fields, by name
    here = apply_here(ledger, wanted, names, lanes, valid, outcome, require_all)
    if here is not None:
        return _applied(ledger, here)
    seqs = [int(w[0]) for w in wanted]
    scope = _scope(seqs, lanes)
    pairs = ledger.spark.createDataFrame(wanted, schema)
    rows = ledger.messages().alias("t").where(F.expr(scope)).join(
        F.broadcast(pairs), "sequence_number")
    checked = rows.withColumns({
        "_valid": F.coalesce(to_column(valid), F.lit(False)),
        "_new_token": F.expr("uuid()"),  # drawn before the checkpoint: fixed from here on
    }).localCheckpoint()
    verdicts = checked.select("sequence_number", "_valid", *LOCATOR).collect()
    good = sorted(int(r[0]) for r in verdicts if r[1])
    changes = None
    if good and (not require_all or len(good) == len(set(seqs))):
        changes = project(checked.where("_valid").withColumn(EXPECT_COLUMN, F.col("row_version")),
                          outcome, LEDGER_TYPES)
        ledger.merge_changes(scope, changes)
    return Applied(
        valid=good, invalid=sorted(int(r[0]) for r in verdicts if not r[1]),
        missing=sorted(set(seqs) - {int(r[0]) for r in verdicts}), changes=changes,
        locators=sorted({(int(r["partition_id"]), int(r["segment"]), str(r["send_id"]))
                         for r in verdicts if r[1]}))


def _applied(ledger: Ledger, here: Decided) -> Applied:
    rows = here.changed
    return Applied(
        valid=here.valid, invalid=here.invalid, missing=here.missing,
        changes=(lambda: handed_frame(ledger.spark, rows)) if rows else None,
        locators=sorted({(int(r["partition_id"]), int(r["segment"]), str(r["send_id"]))
                         for r in rows}), rows=rows or None)


def settle_once(ledger: Ledger, locks: list[tuple[int, str]], lanes: tuple[str, ...],
                ctx: SettleContext) -> SettleResult:
    """One settlement attempt (S6): the rows whose lock is valid change, the rest are
    reported. On the driver where it can (``settle_here``); else one message: one keyed
    Delta DML (``settle_keyed``); more: one guarded MERGE (all of them judged against one
    read, decision 004)."""
    here = settle_here(ledger, locks, lanes, ctx)
    if here is not None:
        return here
    if len(locks) == 1:
        return settle_keyed(ledger, locks[0], lanes, ctx)
    applied = apply_by_sequence(ledger, [(s, t) for s, t in locks], lanes,
                                settle_valid(ctx.now), settle_outcome(ctx))
    return SettleResult(settled=len(applied.valid), lock_lost=applied.invalid,
                        already_settled=applied.missing,
                        locked_until=ctx.renewed_until if ctx.kind == "renew" else None)


def settle_keyed(ledger: Ledger, lock: tuple[int, str], lanes: tuple[str, ...],
                 ctx: SettleContext) -> SettleResult:
    """Settle one message with ONE Delta DELETE (complete) or UPDATE (the others) whose
    condition is the whole rule: literal partition, lanes and sequence number (pruning, and
    the conflict scope Delta checks, fact 2) and ``settle_valid`` with the caller's token.
    Delta commits it atomically against concurrent work on the partition, so no read comes
    first and no guard is needed; its affected-row count is the verdict. Only a settlement
    that changed nothing reads the row, to say lock lost or already settled (S6.6).
    Decision 011: 8 Spark jobs instead of the MERGE path's 20."""
    seq, token = lock
    where = (f"partition_id = {partition_of(seq)} AND lane IN "
             f"({', '.join(repr(str(x)) for x in lanes)}) AND row_type = 'm' "
             f"AND sequence_number = {int(seq)} AND {to_sql(settle_valid(ctx.now, token))}")
    outcome = settle_outcome(ctx)
    if ctx.kind == "complete":
        changed = ledger.delete_where(where)
    else:
        changed = ledger.update_where(", ".join(
            f"`{c}` = CAST({to_sql(e)} AS {LEDGER_TYPES[c].simpleString()})"
            for c, e in outcome.items() if not c.startswith("_")), where)
    if changed:
        return SettleResult(settled=1,
                            locked_until=ctx.renewed_until if ctx.kind == "renew" else None)
    held = ledger.message_rows([seq], lanes).select("sequence_number").first()
    return SettleResult(lock_lost=[seq]) if held is not None else SettleResult(
        already_settled=[seq])


def settle_here(ledger: Ledger, locks: list[tuple[int, str]], lanes: tuple[str, ...],
                ctx: SettleContext) -> SettleResult | None:
    """Settle ``locks`` in one commit on the driver where the ledger allows it (decision
    012, step 4; many locks: decision 021): their partitions read as of one version,
    ``settle_valid`` and ``settle_outcome`` evaluated on each message row, and the lanes
    the rows leave and enter rewritten from that version (a commit since fails it:
    StaleRead, retried). No Spark job; None where this cannot be done here (too many rows
    to read, or no driver commits: Spark decides)."""
    pinned = ledger.pin() if ledger.commits_here() else None
    if pinned is None:
        return None
    try:
        return _settled_here(ledger, pinned, locks, lanes, ctx)
    finally:
        pinned.release()


def _settled_here(ledger: Ledger, pinned: Pinned, locks: list[tuple[int, str]],
                  lanes: tuple[str, ...], ctx: SettleContext) -> SettleResult | None:
    """``settle_here`` on its pinned ledger."""
    wanted = dict(locks)  # one verdict per message
    stored = pinned.rows({"partition_id": sorted({partition_of(s) for s in wanted})}, None,
                         lambda r: True)
    if stored is None:
        return None
    rows = {int(r["sequence_number"]): r for r in stored
            if r["row_type"] == "m" and r["lane"] in lanes and int(r["sequence_number"])
            in wanted}
    result = SettleResult()
    outcome = {c: e for c, e in settle_outcome(ctx).items() if not c.startswith("_")}
    changed: dict[int, dict[str, Any]] = {}
    for seq, token in wanted.items():
        row = rows.get(seq)
        if row is None:
            result.already_settled.append(seq)
        elif settle_valid(ctx.now, token).evaluate(row) is not True:
            result.lock_lost.append(seq)
        else:
            changed[seq] = {**row, **{c: e.evaluate(row) for c, e in outcome.items()}}
    if not changed:
        return result
    moved = {(int(r["partition_id"]), r["lane"])
             for r in [*changed.values(), *(rows[seq] for seq in changed)]}
    kept = [r for r in stored if (int(r["partition_id"]), r["lane"]) in moved and not (
        r["row_type"] == "m" and int(r["sequence_number"]) in changed)]
    written = [] if ctx.kind == "complete" else list(changed.values())
    ledger.rewrite_here(pinned, [{"partition_id": p, "lane": lane} for p, lane in sorted(moved)],
                        kept + written)
    result.settled = len(changed)
    result.locked_until = ctx.renewed_until if ctx.kind == "renew" else None
    return result


def complete_by_records(ledger: Ledger, locks: list[tuple[int, str, datetime]], lane: str
                        ) -> list[SettleResult | None]:
    """Complete messages with completion records, all in one blind append (``engine.
    records``, decision 011; the callers of a group commit, ``engine.group``); for each
    (sequence number, token, held until) its result, or None, committing nothing for it,
    when its lock ends too soon for a record (then a keyed DELETE decides). ``held_until``:
    when the caller was told its lock ends. If the append returned ``CLOCK_MARGIN`` before
    that, no receive can have re-locked the message before the record landed: it is valid,
    and nothing is read. If the append outlasted that, the row as it was just before the
    records' commit says whether it counted."""
    written_at = utcnow()
    results: list[SettleResult | None] = [None] * len(locks)
    chosen = [i for i, (_, _, held) in enumerate(locks) if written_at + RECORD_BUDGET < held]
    if not chosen:
        return results
    tag = f"sbqueue-record-{uuid.uuid4().hex}"
    ledger.append_records(lane, [locks[i][:2] for i in chosen], written_at, tag)
    landed = utcnow()
    late = [i for i in chosen if landed + CLOCK_MARGIN >= locks[i][2]]
    for i in chosen:
        results[i] = SettleResult(settled=1)
    if late:
        before = ledger.tagged_version(tag) - 1
        rows = {int(r["sequence_number"]): r for r in ledger.message_rows(
                [locks[i][0] for i in late], version=before).select(
                "sequence_number", "lane", "lock_token", "locked_until_utc").collect()}
        for i in late:
            results[i] = _record_verdict(rows.get(locks[i][0]), locks[i][:2], lane, written_at)
    return results


def _record_verdict(row: Any, lock: tuple[int, str], lane: str, written_at: datetime
                    ) -> SettleResult:
    """Whether a record written at ``written_at`` completed the row as it stood just before
    the record's commit (``core.transitions.completed_by_record``)."""
    seq, token = lock
    if row is None:
        return SettleResult(already_settled=[seq])
    as_read = {**as_aware(row), RECORD_AT: written_at}
    if row["lane"] == lane and row["lock_token"] == token \
            and completed_by_record().evaluate(as_read):
        return SettleResult(settled=1)
    return SettleResult(lock_lost=[seq])
