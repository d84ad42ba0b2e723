"""An operation on messages named by sequence number, decided and committed on the driver
(the local executor): fetching deferred messages (S6.3), expiring them (S8.2), batch
deletes (S5.7), dead-letter claims and forwarding releases (S13.3).

``settle.apply.apply_by_sequence`` is the rule: find the rows, keep those ``valid`` accepts,
apply ``outcome`` to them in one commit (or to none, ``require_all``). Here the same
``core`` expressions are evaluated on the rows of their partitions as read at one version,
and the lanes the rows leave and enter are rewritten from that version (a commit since
fails it: StaleRead, retried), as ``settle.apply.settle_here`` does for settlements. No Spark
job; None where the ledger cannot be read or committed here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sbqueue.core.expr import Expr
from sbqueue.core.sequence import partition_of
from sbqueue.core.transitions import Outcome
from sbqueue.engine.ledger import Ledger
from sbqueue.store.driver import Pinned

__all__ = ["Decided", "apply_here"]

Row = dict[str, Any]


@dataclass(frozen=True)
class Decided:
    """What ``apply_here`` found and did: the valid, invalid and missing numbers and the
    rows as changed (empty when nothing was committed)."""

    valid: list[int]
    invalid: list[int]
    missing: list[int]
    changed: list[Row]


def apply_here(ledger: Ledger, wanted: Sequence[tuple[Any, ...]], names: Sequence[str],
               lanes: tuple[str, ...], valid: Expr, outcome: Outcome, require_all: bool
               ) -> Decided | None:
    """``apply_by_sequence`` on the driver; ``names``: the fields of each ``wanted`` tuple
    (the first is the sequence number), which ``valid`` and ``outcome`` may read."""
    pinned = ledger.pin() if ledger.commits_here() else None
    if pinned is None:
        return None
    try:
        return _applied(ledger, pinned, wanted, names, lanes, valid, outcome, require_all)
    finally:
        pinned.release()


def _applied(ledger: Ledger, pinned: Pinned, wanted: Sequence[tuple[Any, ...]],
             names: Sequence[str], lanes: tuple[str, ...], valid: Expr, outcome: Outcome,
             require_all: bool) -> Decided | None:
    """``apply_here`` on its pinned ledger."""
    asked = {int(w[0]): dict(zip(names, w, strict=True)) for w in wanted}
    stored = pinned.rows({"partition_id": sorted({partition_of(s) for s in asked})}, None,
                         lambda r: True)
    if stored is None:
        return None
    found = {int(r["sequence_number"]): r for r in stored
             if r["row_type"] == "m" and r["lane"] in lanes
             and int(r["sequence_number"]) in asked}
    # the row as the rule sees it: stored, the caller's values, a fresh token drawn once
    seen = {seq: {**row, **asked[seq], "_new_token": str(uuid.uuid4())}
            for seq, row in found.items()}
    good = sorted(seq for seq, row in seen.items() if valid.evaluate(row) is True)
    decided = Decided(valid=good, invalid=sorted(set(found) - set(good)),
                      missing=sorted(set(asked) - set(found)), changed=[])
    if not good or (require_all and len(good) != len(asked)):
        return decided
    changed = {seq: {**found[seq], **{c: e.evaluate(seen[seq]) for c, e in outcome.items()}}
               for seq in good}
    moved = {(int(r["partition_id"]), str(r["lane"]))
             for r in [*changed.values(), *(found[seq] for seq in changed)]}
    kept = [r for r in stored if (int(r["partition_id"]), r["lane"]) in moved and not (
        r["row_type"] == "m" and int(r["sequence_number"]) in changed)]
    written = [{c: v for c, v in r.items() if not c.startswith("_")}
               for r in changed.values() if r.get("_op") != "delete"]
    ledger.rewrite_here(pinned, [{"partition_id": p, "lane": lane} for p, lane in sorted(moved)],
                        kept + written)
    return Decided(decided.valid, decided.invalid, decided.missing, list(changed.values()))
