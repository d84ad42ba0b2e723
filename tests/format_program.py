"""``format("sbqueue")`` in a session that never called ``sbqueue.datasource.register``.

``format_program.py ROOT CHECKPOINT``: sends 5 messages to queue ``in``, reads them with
``spark.read.format("sbqueue")``, streams ``in`` into queue ``out`` (``readStream`` and
``writeStream`` ``.format("sbqueue")``, ``availableNow``), reads ``out``; then calls
``register`` and reads ``out`` again (the registration and Spark's own must not clash).
Prints ``format-program {json}``. ``test_format_found`` runs it with ``python`` (the local
session of ``get_session()``) and with ``spark-submit`` (the session it configured), from
a folder other than the checkout, with the folder holding ``pyspark_sbqueue.py`` on the
path as site-packages holds it for an installed wheel.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import DataFrame

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.spark import get_session


def main(root: str, checkpoint: str) -> None:
    admin = ServiceBusAdministrationClient(root)
    admin.create_queue("in", enable_partitioning=True)
    admin.create_queue("out")
    with ServiceBusClient(root) as client, client.get_queue_sender("in") as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"id{i}")
                              for i in range(5)])
    spark = get_session("format-program")

    def read(entity: str) -> DataFrame:
        return (spark.read.format("sbqueue").option("namespace", root)
                .option("entity", entity).load())

    def bodies(entity: str) -> list[str]:
        return sorted(bytes(row.body).decode() for row in read(entity).collect())

    assert "sbqueue.datasource" not in sys.modules, "something imported register"
    read_in = bodies("in")
    query = (spark.readStream.format("sbqueue").option("namespace", root)
             .option("entity", "in").load().select("body", "message_id")
             .writeStream.format("sbqueue").option("namespace", root)
             .option("entity", "out").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    streamed = bodies("out")
    left = read("in").count()
    assert "sbqueue.datasource" not in sys.modules, "something imported register"

    from sbqueue.datasource import register

    register(spark)
    after_register = bodies("out")
    print("format-program " + json.dumps({
        "master": spark.sparkContext.master, "read": read_in, "streamed": streamed,
        "left_in": left, "after_register": after_register}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
