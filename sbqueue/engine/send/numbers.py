"""A send's sequence numbers, read from its partitions' heads (S3.1, S3.4; decision 011).

``schedule_messages`` returns the numbers its messages got. The Spark SQL view knows them
(``engine.reads.view``), but computing the view numbers every message of every partition. A
send's rows need only their own partitions: a row the cursor has passed has its number in
its ledger row; a row still after the cursor gets the cursor's counter plus its rank after
the cursor in commit order (the rule of ``engine.receive.attempt``), so counting the inbox rows
between the cursor and the send's first row tells the rest. Reads only; no commit.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pyspark.sql import functions as F

from sbqueue.core.sequence import sequence_of
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.receive.attempt import first_cursor
from sbqueue.store.thresholds import ROW_LIMIT

__all__ = ["send_numbers"]

Position = tuple[int, int]  # (commit version, batch index): an inbox row's place


def send_numbers(inbox: Inbox, ledger: Ledger, send_id: str) -> list[int] | None:
    """The numbers of the messages of send ``send_id`` in batch-index order (send order
    for a send made in send order, ``Entity.send_dataframe``), or None when they
    cannot be told this way (a passed row without a ledger row). Not for entities that
    detect duplicates: a duplicate gets no number, and only the view knows which. Each read
    is made on the driver where the entity is local (no Spark job), else with Spark."""
    sent = _sent(inbox, send_id)
    if not sent:
        return []
    partitions = sorted({p for p, _, _ in sent})
    read = _heads(ledger, partitions, send_id)
    first = [first_cursor(p) for p in partitions]  # a partition without a p row
    cursors = {c.partition: ((c.version, c.position), c.counter) for c in first}
    cursors.update({int(r["partition_id"]): ((int(r["cursor_version"]), int(r["cursor_index"])),
                                              int(r["last_counter"]))
                    for r in read if r["row_type"] == "p"})
    stored = {(int(r["partition_id"]), int(r["batch_index"])): int(r["sequence_number"])
              for r in read if r["row_type"] == "m"}
    waiting: dict[int, list[Position]] = {}
    for partition, index, version in sent:
        if (partition, index) in stored:
            continue
        if partition not in cursors or (version, index) <= cursors[partition][0]:
            return None  # passed, and no ledger row tells its number
        waiting.setdefault(partition, []).append((version, index))
    numbers = dict(stored)
    before = _rows_before(inbox, cursors, waiting)
    for partition, places in waiting.items():
        base = sequence_of(partition, cursors[partition][1] + before.get(partition, 0))
        for rank, (_, index) in enumerate(sorted(places), start=1):
            numbers[(partition, index)] = base + rank
    return [numbers[(p, i)] for p, i, _ in sorted(sent, key=lambda r: r[1])]


def _sent(inbox: Inbox, send_id: str) -> list[tuple[int, int, int]]:
    """(partition, batch index, commit version) of each row the send stored: its commit
    carries the send id (``engine.send.frame``), so on the driver only that commit is read."""
    version = inbox.tagged_here(send_id)
    if version is not None:
        here = inbox.appended_here(version - 1, version, ["partition_id", "batch_index",
                                                          "send_id"],
                                   lambda r: r["send_id"] == send_id,
                                   ("_commit_version", "batch_index"), ROW_LIMIT)
        if here is not None:
            return [(r["partition_id"], r["batch_index"], r["_commit_version"]) for r in here]
    return [(int(r[0]), int(r[1]), int(r[2])) for r in
            inbox.in_order(F.col("send_id") == send_id)
            .select("partition_id", "batch_index", "v").collect()]


def _heads(ledger: Ledger, partitions: list[int], send_id: str) -> list[dict[str, Any]]:
    """The cursors of these partitions and the ledger rows of the send's messages."""
    columns = ["row_type", "partition_id", "sequence_number", "batch_index", "send_id",
               "cursor_version", "cursor_index", "last_counter"]
    here = ledger.scan_here({"partition_id": partitions}, columns, lambda r: r["row_type"] == "p"
                            or (r["row_type"] == "m" and r["send_id"] == send_id))
    if here is not None:
        return here
    return [r.asDict() for r in ledger.rows(F.col("partition_id").isin(partitions) & (
                (F.col("row_type") == "p")
                | ((F.col("row_type") == "m") & (F.col("send_id") == send_id))))
            .select(*columns).collect()]


def _rows_before(inbox: Inbox, cursors: dict[int, tuple[Position, int]],
                 waiting: dict[int, list[Position]]) -> dict[int, int]:
    """Per partition: the inbox rows after its cursor and before the send's first row
    there, counted in one read."""
    if not waiting:
        return {}
    bounds = {p: (cursors[p][0], min(places)) for p, places in waiting.items()}
    here = inbox.appended_here(
        min(c for c, _ in bounds.values())[0] - 1, max(f for _, f in bounds.values())[0],
        ["partition_id", "batch_index"],
        lambda r: r["partition_id"] in bounds and bounds[r["partition_id"]][0]
        < (r["_commit_version"], r["batch_index"]) < bounds[r["partition_id"]][1],
        ("_commit_version", "batch_index"), ROW_LIMIT)
    if here is not None:
        return dict(Counter(int(r["partition_id"]) for r in here))
    clauses = []
    for partition, ((cv, ci), (fv, fi)) in bounds.items():
        clauses.append(
            f"(partition_id = {partition} AND (v > {cv} OR (v = {cv} AND batch_index > {ci}))"
            f" AND (v < {fv} OR (v = {fv} AND batch_index < {fi})))")
    rows = (inbox.in_order(F.col("partition_id").isin(sorted(waiting)))
            .select("partition_id", "batch_index", "v")
            .where(" OR ".join(clauses)).groupBy("partition_id").count().collect())
    return {int(r[0]): int(r[1]) for r in rows}
