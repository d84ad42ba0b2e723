# Databricks notebook source
# %% [markdown]
# # sbqueue operations
#
# Day-to-day care of a namespace: what is forwarding, what is dead-lettered and why,
# resubmitting, and what maintenance did (read back from the Delta log). Opens on
# Databricks (widget `namespace_root`); runs headless on a laptop like the quickstart.

# COMMAND ----------
# %%
import json
import os
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.datasource import register
from sbqueue.engine.forward.job import Forwarder, forwarding_sources
from sbqueue.engine.maintain.job import MARK, Maintainer
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.spark import get_session

try:  # Databricks: a widget; elsewhere: the environment
    dbutils.widgets.text("namespace_root", "/Volumes/main/sbqueue/namespace")  # type: ignore[name-defined]
    ROOT = dbutils.widgets.get("namespace_root")  # type: ignore[name-defined]
except NameError:
    ROOT = os.environ.get("SBQUEUE_NAMESPACE", "./sbqueue-data")
PLOTS = os.environ.get("SBQUEUE_PLOTS", ".")
spark = get_session("sbqueue-operations")
admin = ServiceBusAdministrationClient(ROOT, spark=spark)
ns = Namespace(ROOT, spark)

# COMMAND ----------
# %% [markdown]
# ## A small setup to look at: `ops-in` forwards to `ops`; some messages fail

# COMMAND ----------
# %%
for name in ("ops-in", "ops"):
    if admin.namespace.catalog.queue_exists(name):
        admin.delete_queue(name)
admin.create_queue("ops", enable_partitioning=True, max_delivery_count=1)
admin.create_queue("ops-in", enable_partitioning=True, forward_to="ops")
with ServiceBusClient(ROOT, spark=spark) as client:
    client.get_queue_sender("ops-in").send_messages(
        [ServiceBusMessage(f"job {i}", message_id=f"job-{i}", subject="nightly" if i % 3
                           else "adhoc") for i in range(30)])

# COMMAND ----------
# %% [markdown]
# ## Forwarding status: transfer counts at each source, then one forwarding step

# COMMAND ----------
# %%
def forwarding_status() -> list[dict[str, object]]:
    status = []
    for path in forwarding_sources(ns):
        counts = ns.entity(path).counts()
        status.append({"source": path, "to": ns.entity(path).props.forward_to,
                       "transfer": counts["transfer"],
                       "transfer_dead_letter": counts["transfer_dead_letter"]})
    return status


print(forwarding_status())
print(Forwarder(ns, "ops-in").step())
print(forwarding_status())
forwarded = ns.entity("ops").version()  # the version the forwarded messages arrived in

# COMMAND ----------
# %% [markdown]
# ## Dead-letter inspection: the ad-hoc jobs fail and are dead-lettered

# COMMAND ----------
# %%
ops = ns.entity("ops")
batch = ops.receive_dataframe(100).localCheckpoint()
ops.complete_dataframe(batch.where("subject = 'nightly'"))
ops.dead_letter_dataframe(batch.where("subject = 'adhoc'"), "AdhocRejected",
                          "ad-hoc jobs need approval")
dead = spark.sql(f"""
    SELECT dead_letter_reason, subject, count(*) AS messages, min(enqueued_time_utc) AS oldest
    FROM {ns.sql_name('ops')} WHERE sub_queue = 'DeadLetter' GROUP BY 1, 2""")
dead.show(truncate=False)

# COMMAND ----------
# %% [markdown]
# ## Resubmit: the dead-lettered ad-hoc jobs go back to `ops`, exactly once

# COMMAND ----------
# %%
print(Forwarder(ns, "ops").resubmit("dead_letter_reason = 'AdhocRejected'", "ops", 1000))
print(ops.counts())

# COMMAND ----------
# %% [markdown]
# ## Time travel: `ops` as the forwarded messages arrived, and the ad-hoc jobs replayed
# to an audit queue as they were then (new sequence numbers, their origin named)

# COMMAND ----------
# %%
if admin.namespace.catalog.queue_exists("ops-audit"):
    admin.delete_queue("ops-audit")
admin.create_queue("ops-audit")
ops.as_of(forwarded).groupBy("sub_queue", "state").count().show()
print(ops.replay(forwarded, "ops-audit", where="subject = 'adhoc'"))
ns.entity("ops-audit").messages().select(
    "sequence_number", "message_id", "application_properties").show(5, truncate=False)

# COMMAND ----------
# %% [markdown]
# ## `format("sbqueue")`: `ops`'s dead letters read as a table; a Structured Streaming
# query that sends operator notes to `ops-audit` (each micro-batch once), and one that
# drains `ops-audit` into a Delta table (each batch completed once it is written)

# COMMAND ----------
# %%
register(spark)
root = os.path.abspath(ROOT)  # the data source's workers need an absolute path
(spark.read.format("sbqueue").option("namespace", root)
 .option("entity", "ops/$DeadLetterQueue").load()
 .groupBy("dead_letter_reason").count().show(truncate=False))
notes = tempfile.mkdtemp(prefix="ops-notes-")
with open(os.path.join(notes, "notes.json"), "w") as out:
    out.write(json.dumps({"body": "resubmitted the ad-hoc jobs", "subject": "note"}) + "\n")
(spark.readStream.schema("body string, subject string").json(notes)
 .writeStream.format("sbqueue").option("namespace", root).option("entity", "ops-audit")
 .option("checkpointLocation", os.path.join(notes, "_checkpoint"))
 .trigger(availableNow=True).start().awaitTermination())
print(ns.entity("ops-audit").counts())
audit_table = os.path.join(notes, "audit-table")
(spark.readStream.format("sbqueue").option("namespace", root).option("entity", "ops-audit")
 .load().selectExpr("message_id", "CAST(body AS STRING) AS text", "subject")
 .writeStream.format("delta").option("checkpointLocation", os.path.join(notes, "_drain"))
 .trigger(availableNow=True).start(audit_table).awaitTermination())
spark.read.format("delta").load(audit_table).show(truncate=False)
print(ns.entity("ops-audit").counts())  # all completed: the table holds them

# COMMAND ----------
# %% [markdown]
# ## Maintenance, and its history from the Delta log

# COMMAND ----------
# %%
for report in Maintainer(ns).run(["ops-in", "ops"]):
    print(report)
history = None
for path in ("ops-in", "ops"):
    entity = ns.entity(path)
    for table in (entity.inbox_path, entity.ledger_path):
        rows = (DeltaTable.forPath(spark, table).history()
                .where((F.col("userMetadata") == MARK)
                       | F.col("operation").isin("OPTIMIZE", "VACUUM START", "VACUUM END",
                                                 "DELETE"))
                .select(F.lit(path).alias("entity"), "version", "timestamp", "operation",
                        F.col("operationMetrics.executionTimeMs").alias("ms")))
        history = rows if history is None else history.unionByName(rows)
assert history is not None
history.orderBy("timestamp").show(truncate=False)
by_operation = {r[0]: r[1] for r in history.groupBy("operation").count().collect()}
fig, ax = plt.subplots(figsize=(6, 3))
ax.bar(list(by_operation), list(by_operation.values()))
ax.set_ylabel("commits")
ax.set_title("maintenance commits by operation")
fig.tight_layout()
fig.savefig(os.path.join(PLOTS, "operations-maintenance.png"))
