"""Peek (S9): messages in enqueued-time then sequence order, no lock, no commit."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from sbqueue.core.clock import as_utc, utcnow
from sbqueue.core.sequence import partition_of
from sbqueue.engine.handle import EntityHandle
from sbqueue.engine.reads.peek_here import peek_here

__all__ = ["peek_dataframe", "peek_rows"]


def peek_dataframe(entity: EntityHandle, max_messages: int = 1000, from_sequence: int | None = None,
                   after: tuple[datetime, int] | None = None,
                   session_id: str | None = None) -> DataFrame:
    """Messages in enqueued-time then sequence order; no lock, no change, no commit
    (S9.1-S9.3). The main queue shows Active, Deferred and Scheduled messages.
    ``from_sequence``: from that number on, within its partition (S9.3); ``after``:
    strictly after that (enqueued time, sequence number), to continue a peek (S9.1);
    ``session_id``: that session's messages only (a session receiver's peek)."""
    view = entity.messages().where(F.col("sub_queue") == entity.sub_queue.view_name)
    if session_id is not None:
        view = view.where(F.col("session_id") == session_id)
    seq, time_ = F.col("sequence_number"), F.col("enqueued_time_utc")
    if from_sequence is not None:
        view = view.where((F.col("partition_id") == partition_of(from_sequence))
                          & (seq >= from_sequence))
    if after is not None:
        at = F.lit(after[0]).cast("timestamp")
        view = view.where((time_ > at) | ((time_ == at) & (seq > after[1])))
    return view.orderBy("enqueued_time_utc", "sequence_number").limit(max_messages)


def peek_rows(entity: EntityHandle, max_messages: int = 1000, from_sequence: int | None = None,
              after: tuple[datetime, int] | None = None,
              session_id: str | None = None) -> list[Row]:
    """``peek_dataframe`` collected (the client's peek): read on the driver where it
    can be (``engine.reads.peek_here``, no Spark job), else through the view."""
    if after is not None:  # a naive time is UTC on both paths (Spark would read local)
        after = (as_utc(after[0]), after[1])
    if entity.dedupe is None:  # the view drops duplicates: Spark decides which
        here = peek_here(entity.inbox, entity.ledger, entity.partitions, entity.target, utcnow(),
                         entity.sub_queue.view_name, max_messages, from_sequence, after,
                         session_id)
        if here is not None:
            return here
    return peek_dataframe(entity, max_messages, from_sequence, after, session_id).collect()
