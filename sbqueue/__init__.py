"""sbqueue: Azure Service Bus partitioned queues and topics on Spark and Delta Lake."""
