"""A program as a user of an installed wheel writes it, run by the venv's python by path.

`.ci/wheel-check` runs it with ``PATH=/usr/bin:/bin`` and no ``VIRTUAL_ENV`` or
``PYSPARK_*`` variables (as pipx, cron, systemd, IDEs and Docker ``CMD`` start programs):
what runs Python inside Spark's workers must find sbqueue there (issue 17). What it does,
and what it checks:

- keyed client sends (routed on the driver, where the queue is local), then a receive
  that gets at least one of them back, and completes what it got;
- a topic send through a SQL filter: the filtered subscription receives exactly the
  matching message;
- a DataFrame send whose bodies a user's Python UDF makes and whose ``session_id`` column
  sbqueue's routing UDF routes, both run in Spark's Python workers;
- ``spark.read.format("sbqueue")`` with no ``register`` (issue 41): it reads as many rows
  as the queue's view, at least the 20 just sent;
- a DataFrame receive of what is left, completed: exactly the 20 rows sent (so the client
  receive above got and completed all six).

Prints ``venv-program: ok`` at the end; any failure exits non-zero.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import functions as F

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient, SqlRuleFilter


def main(folder: str) -> None:
    admin = ServiceBusAdministrationClient(folder)
    admin.create_queue("orders", enable_partitioning=True)
    admin.create_topic("events", enable_partitioning=True)
    admin.create_subscription("events", "red")
    admin.delete_rule("events", "red", "$Default")
    admin.create_rule("events", "red", "only-red", filter=SqlRuleFilter("color = 'red'"))
    spark = admin.namespace.spark
    workers = spark.conf.get("spark.pyspark.python", None)
    print(f"venv-program: driver {sys.executable}, workers {workers}")

    with ServiceBusClient(folder) as client:
        with client.get_queue_sender("orders") as sender:  # keyed: routed by the UDF
            sender.send_messages([ServiceBusMessage(f"o{i}", partition_key=f"k{i % 3}")
                                  for i in range(6)])
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            got = receiver.receive_messages(max_message_count=6, max_wait_time=10)
            assert got, "the receive returned nothing"
            for message in got:
                receiver.complete_message(message)
        with client.get_topic_sender("events") as sender:
            sender.send_messages([ServiceBusMessage("r", application_properties={
                "color": "red"}), ServiceBusMessage("b", application_properties={
                    "color": "blue"})])
        with client.get_subscription_receiver("events", "red", max_wait_time=5) as red:
            bodies = [str(m) for m in red.receive_messages(max_message_count=5,
                                                           max_wait_time=10)]
            assert bodies == ["r"], bodies

    ns = Namespace(folder, spark=spark)
    orders = ns.entity("orders")
    shout = F.udf(lambda s: s.upper(), "string")  # a user's own Python UDF
    df = spark.range(20).select(shout(F.concat(F.lit("p"), F.col("id").cast("string")))
                                .alias("body"),
                                F.concat(F.lit("c"), F.col("id") % 4).alias("session_id"))
    sent = orders.send_dataframe(df).count
    # format("sbqueue") with no register(): Spark finds the wheel's pyspark_sbqueue module
    # in the venv's site-packages by itself (issue 41)
    read = (spark.read.format("sbqueue").option("namespace", os.path.abspath(folder))
            .option("entity", "orders").load())
    assert read.count() == orders.messages().count() >= 20, read.count()
    batch = orders.receive_dataframe(max_messages=100)
    done = orders.complete_dataframe(batch).settled
    assert sent == done == 20, (sent, done)
    print("venv-program: ok")


if __name__ == "__main__":
    main(sys.argv[1])
