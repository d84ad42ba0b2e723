"""User functions for the dequeue job's tests (imported by path, as a user's would be)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def upper(batch: DataFrame) -> DataFrame:
    """One result row a message; a message whose body is 'bad' fails."""
    text = F.col("body").cast("string")
    return batch.select("sequence_number", F.upper(text).alias("text"),
                        (text == "bad").alias("_failed"),
                        F.when(text == "bad", F.lit("cannot shout 'bad'")).alias("_error"))
