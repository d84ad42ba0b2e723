"""Streaming queries with ``format("sbqueue")``, run in their own process so that a test
can kill the driver (``test_stream_kill``, ``test_stream_source_kill``).

``stream_program.py DIRECTION ROOT QUEUE FOLDER CHECKPOINT MODE``:

- DIRECTION ``into``: JSON files in FOLDER streamed into the queue (the sink);
  ``from``: the queue streamed into a Delta table at FOLDER (the source);
- MODE ``forever``: micro-batch after micro-batch, each slowed by a UDF so that a kill
  lands inside one as often as between two; ``drain``: what is there (``availableNow``),
  then exit.
"""

from __future__ import annotations

import sys
import time

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from sbqueue.datasource import register
from sbqueue.spark import get_session

SCHEMA = "body string, message_id string"


@F.udf(StringType())
def slowly(text: str) -> str:
    time.sleep(0.15)
    return text


def _writer(rows: DataFrame, direction: str, root: str, queue: str, folder: str,
            checkpoint: str):  # type: ignore[no-untyped-def]
    if direction == "into":
        return (rows.writeStream.format("sbqueue").option("namespace", root)
                .option("entity", queue).option("checkpointLocation", checkpoint))
    return (rows.writeStream.format("delta").option("checkpointLocation", checkpoint)
            .option("path", folder))


def main(direction: str, root: str, queue: str, folder: str, checkpoint: str,
         mode: str) -> None:
    spark = get_session("stream-program")
    register(spark)
    if direction == "into":
        rows = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(folder)
                .select(slowly("body").alias("body"), "message_id"))
    else:
        rows = (spark.readStream.format("sbqueue").option("namespace", root)
                .option("entity", queue).option("maxMessagesPerBatch", 8).load()
                .select(slowly("message_id").alias("message_id"), "delivery_count"))
    writer = _writer(rows, direction, root, queue, folder, checkpoint)
    if mode == "drain":
        writer.trigger(availableNow=True).start().awaitTermination()
        print("stream-program: drained", flush=True)
        return
    query = writer.trigger(processingTime="0 seconds").start()
    print("stream-program: started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:7])
