"""A send's sequence numbers, read from its partitions' heads (S3.1, S3.4; decision 011).

``schedule_messages`` returns the numbers its messages got. The Spark SQL view knows them
(``engine.reads``), but computing the view numbers every message of every partition. A
send's rows need only their own partitions: a row the cursor has passed has its number in
its ledger row; a row still after the cursor gets the cursor's counter plus its rank after
the cursor in commit order (the rule of ``engine.receive``), so counting the inbox rows
between the cursor and the send's first row tells the rest. Reads only; no commit.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from sbqueue.core.sequence import sequence_of
from sbqueue.engine.inbox import Inbox
from sbqueue.engine.ledger import Ledger
from sbqueue.engine.receive import first_cursor

__all__ = ["send_numbers"]

Position = tuple[int, int]  # (commit version, batch index): an inbox row's place


def send_numbers(inbox: Inbox, ledger: Ledger, send_id: str) -> list[int] | None:
    """The numbers of the messages of send ``send_id`` in send order, or None when they
    cannot be told this way (a passed row without a ledger row). Not for entities that
    detect duplicates: a duplicate gets no number, and only the view knows which."""
    sent = (inbox.in_order(F.col("send_id") == send_id)
            .select("partition_id", "batch_index", "v").collect())
    if not sent:
        return []
    partitions = sorted({int(r[0]) for r in sent})
    read = (ledger.rows(F.col("partition_id").isin(partitions) & (
                (F.col("row_type") == "p")
                | ((F.col("row_type") == "m") & (F.col("send_id") == send_id))))
            .select("row_type", "partition_id", "sequence_number", "batch_index",
                    "cursor_version", "cursor_index", "last_counter").collect())
    first = [first_cursor(p) for p in partitions]  # a partition without a p row
    cursors = {c.partition: ((c.version, c.position), c.counter) for c in first}
    cursors.update({int(r[1]): ((int(r[4]), int(r[5])), int(r[6])) for r in read
                    if r[0] == "p"})
    stored = {(int(r[1]), int(r[3])): int(r[2]) for r in read if r[0] == "m"}
    waiting: dict[int, list[Position]] = {}
    for r in sent:
        partition, index, version = int(r[0]), int(r[1]), int(r[2])
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
    return [numbers[(int(r[0]), int(r[1]))] for r in sorted(sent, key=lambda r: int(r[1]))]


def _rows_before(inbox: Inbox, cursors: dict[int, tuple[Position, int]],
                 waiting: dict[int, list[Position]]) -> dict[int, int]:
    """Per partition: the inbox rows after its cursor and before the send's first row
    there, counted in one query."""
    if not waiting:
        return {}
    clauses = []
    for partition, places in waiting.items():
        (cv, ci), _ = cursors[partition]
        fv, fi = min(places)
        clauses.append(
            f"(partition_id = {partition} AND (v > {cv} OR (v = {cv} AND batch_index > {ci}))"
            f" AND (v < {fv} OR (v = {fv} AND batch_index < {fi})))")
    rows = (inbox.in_order(F.col("partition_id").isin(sorted(waiting)))
            .select("partition_id", "batch_index", "v")
            .where(" OR ".join(clauses)).groupBy("partition_id").count().collect())
    return {int(r[0]): int(r[1]) for r in rows}
