"""A streaming query from JSON files into a queue (``format("sbqueue")``), run in its own
process so that a test can kill its driver (``test_stream_kill``).

``stream_program.py ROOT QUEUE SOURCE CHECKPOINT MODE``: MODE ``forever`` runs micro-batch
after micro-batch, each slowed by a UDF so that a kill lands inside one as often as
between two; ``drain`` runs what is left (``availableNow``) and exits.
"""

from __future__ import annotations

import sys
import time

from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from sbqueue.datasource import register
from sbqueue.spark import get_session

SCHEMA = "body string, message_id string"


@F.udf(StringType())
def slowly(body: str) -> str:
    time.sleep(0.15)
    return body


def main(root: str, queue: str, source: str, checkpoint: str, mode: str) -> None:
    spark = get_session("stream-program")
    register(spark)
    rows = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source)
            .select(slowly("body").alias("body"), "message_id"))
    writer = (rows.writeStream.format("sbqueue").option("namespace", root)
              .option("entity", queue).option("checkpointLocation", checkpoint))
    if mode == "drain":
        writer.trigger(availableNow=True).start().awaitTermination()
        print("stream-program: drained", flush=True)
        return
    query = writer.trigger(processingTime="0 seconds").start()
    print("stream-program: started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
