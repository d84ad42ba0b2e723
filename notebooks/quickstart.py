# Databricks notebook source
# %% [markdown]
# # sbqueue quickstart
#
# A Service Bus queue on Delta tables: create it, send, receive, settle, query it with
# Spark SQL, and look at how its partitions fill and how fast sends go. On Databricks this
# file opens as a notebook (set the `namespace_root` widget); on a laptop it runs headless:
# `SBQUEUE_NAMESPACE=/tmp/ns SBQUEUE_PLOTS=/tmp/plots python -m jupytext --execute ...` or
# as `tests/integration/test_notebooks.py` runs it.

# COMMAND ----------
# %%
import os
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.spark import get_session

try:  # Databricks: a widget; elsewhere: the environment
    dbutils.widgets.text("namespace_root", "/Volumes/main/sbqueue/namespace")  # type: ignore[name-defined]
    ROOT = dbutils.widgets.get("namespace_root")  # type: ignore[name-defined]
except NameError:
    ROOT = os.environ.get("SBQUEUE_NAMESPACE", "./sbqueue-data")
PLOTS = os.environ.get("SBQUEUE_PLOTS", ".")
spark = get_session("sbqueue-quickstart")  # the notebook's own session where there is one
admin = ServiceBusAdministrationClient(ROOT, spark=spark)
ns = Namespace(ROOT, spark)

# COMMAND ----------
# %% [markdown]
# ## Create a partitioned queue

# COMMAND ----------
# %%
if admin.namespace.catalog.queue_exists("quickstart"):
    admin.delete_queue("quickstart")
admin.create_queue("quickstart", enable_partitioning=True, max_delivery_count=5)
queue = ns.entity("quickstart")
print(admin.get_queue("quickstart"))

# COMMAND ----------
# %% [markdown]
# ## Send: a DataFrame of 2,000 messages, and a few through the client

# COMMAND ----------
# %%
orders = spark.range(2000).selectExpr(
    "concat('order ', CAST(id AS STRING)) AS body",
    "CAST(id % 50 AS STRING) AS partition_key",
    "named_struct('amount', CAST(id * 1.5 AS DOUBLE), 'region', IF(id % 2 = 0, 'eu', 'us')) "
    "AS application_properties")
print(queue.send_dataframe(orders))
with ServiceBusClient(ROOT, spark=spark) as client:
    client.get_queue_sender("quickstart").send_messages(
        [ServiceBusMessage(f"hello {i}", subject="greeting") for i in range(3)])

# COMMAND ----------
# %% [markdown]
# ## Receive and settle: a peek-lock batch as a DataFrame, completed in one commit

# COMMAND ----------
# %%
batch = queue.receive_dataframe(max_messages=500).localCheckpoint()
print("received", batch.count())
print(queue.complete_dataframe(batch))
with ServiceBusClient(ROOT, spark=spark) as client, \
        client.get_queue_receiver("quickstart", max_wait_time=5) as receiver:
    for message in receiver.receive_messages(max_message_count=2):
        print(message.sequence_number, str(message))
        receiver.complete_message(message)

# COMMAND ----------
# %% [markdown]
# ## Spark SQL over the queue

# COMMAND ----------
# %%
view = ns.sql_name("quickstart")
summary = spark.sql(f"""
    SELECT application_properties:region::string AS region, count(*) AS messages,
           round(sum(application_properties:amount::double), 1) AS amount
    FROM {view} WHERE sub_queue = 'Main' GROUP BY 1 ORDER BY 1""")
summary.show()

# COMMAND ----------
# %% [markdown]
# ## Messages per partition

# COMMAND ----------
# %%
counts = queue.partition_counts()
fig, ax = plt.subplots(figsize=(8, 3))
ax.bar([str(p) for p in counts], list(counts.values()))
ax.set_xlabel("partition")
ax.set_ylabel("messages")
ax.set_title("quickstart: messages per partition")
fig.tight_layout()
fig.savefig(os.path.join(PLOTS, "quickstart-partitions.png"))

# COMMAND ----------
# %% [markdown]
# ## Send throughput by batch size

# COMMAND ----------
# %%
sizes, rates = [1_000, 5_000, 20_000], []
for size in sizes:
    rows = spark.range(size).selectExpr("CAST(id AS STRING) AS body").localCheckpoint()
    started = time.perf_counter()
    queue.send_dataframe(rows)
    rates.append(size / (time.perf_counter() - started))
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(sizes, rates, "o-")
ax.set_xscale("log")
ax.set_xlabel("messages per send")
ax.set_ylabel("messages per second")
ax.set_title("quickstart: send throughput")
fig.tight_layout()
fig.savefig(os.path.join(PLOTS, "quickstart-throughput.png"))
print({s: round(r) for s, r in zip(sizes, rates, strict=True)})
