"""Which candidates a receive hands out and how far each partition cursor moves (S5.4, S5.5).

The same ranking as the Spark projection of ``engine.receive.attempt`` (``_pick``), on plain rows,
for receives small enough to decide on the driver (decision 011). Each row is a mapping
with ``partition_id``, ``sequence_number``, ``origin`` ('inbox' or 'ledger'), ``_pending``
and ``_void``; ``deliverable`` is ``core.transitions.deliverable`` of the receive. The
function adds ``_picked``, ``_passed`` (an inbox row the cursor moves past), ``_left``
(deliverable rows of the partition not taken) and ``_cursor_to`` (the row the cursor
moves to) to every row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from sbqueue.core.expr import Expr

__all__ = ["pick"]

Row = dict[str, Any]


def _first(values: list[int]) -> int | None:
    return min(values) if values else None


def _last(values: list[int]) -> int | None:
    return max(values) if values else None


def pick(rows: list[Row], deliverable: Expr | Callable[[Row], Any], share: int, total: int,
         asked: int, rotation: int, pass_to: dict[int, int] | None = None,
         sessions: frozenset[str] = frozenset()) -> None:
    """Mark ``rows`` in place. ``asked``: how many partitions the receive asked;
    ``rotation``: where the round over partitions starts when fewer than a share of each
    are wanted; ``pass_to``: partition -> sequence number the cursor passes regardless;
    ``sessions``: only these sessions' messages, ``share`` of each, in sequence order
    (S10.4)."""
    ok_now = deliverable.compiled() if isinstance(deliverable, Expr) else deliverable
    by_partition: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        by_partition[int(row["partition_id"])].append(row)
    picked: list[Row] = []
    for part_rows in by_partition.values():
        part_rows.sort(key=lambda r: int(r["sequence_number"]))
        first_pending = _first([r["sequence_number"] for r in part_rows if r["_pending"]])
        ranks: dict[Any, int] = defaultdict(int)
        for row in part_rows:
            seq = row["sequence_number"]
            ok = (ok_now(row) is True and not row["_void"]
                  and (first_pending is None or seq < first_pending)
                  and (not sessions or row["session_id"] in sessions))
            row["_ok"] = ok
            group = row["session_id"] if sessions else None
            ranks[group] += ok
            row["_rank"] = ranks[group]
            row["_picked"] = ok and ranks[group] <= share
            if row["_picked"]:
                picked.append(row)
    if not sessions and total < share * asked:  # a round over partitions, up to total
        picked.sort(key=lambda r: (r["_rank"], (int(r["partition_id"]) + rotation) % (1 << 16)))
        for row in picked[total:]:
            row["_picked"] = False
    for partition, part_rows in by_partition.items():
        _mark_cursor(part_rows, (pass_to or {}).get(partition))


def _mark_cursor(rows: list[Row], floor: int | None) -> None:
    """``_passed``, ``_left`` and ``_cursor_to`` of one partition's rows (sorted): the cursor
    passes what was handed out and every inbox row before the first one that could be; all
    it saw, when none could; never a transaction still committing or what follows it."""
    inbox = [r for r in rows if r["origin"] == "inbox"]
    seqs = [r["sequence_number"] for r in inbox]
    last_picked = _last([r["sequence_number"] for r in inbox if r["_picked"]])
    first_ok = _first([r["sequence_number"] for r in inbox if r["_ok"]])
    before_ok = first_ok - 1 if first_ok is not None else _last(seqs)
    limit = max(v for v in (last_picked if last_picked is not None else -1, before_ok, floor)
                if v is not None)
    first_pending = _first([r["sequence_number"] for r in rows if r["_pending"]])
    if first_pending is not None:
        limit = min(limit, first_pending - 1)
    left = sum(1 for r in rows if r["_ok"] and not r["_picked"])
    passed = [s for s in seqs if s <= limit]
    cursor_to = max(passed) if passed else None
    for row in rows:
        row["_passed"] = row["origin"] == "inbox" and row["sequence_number"] <= limit
        row["_left"] = left
        row["_cursor_to"] = row["_passed"] and row["sequence_number"] == cursor_to
        del row["_ok"], row["_rank"]
