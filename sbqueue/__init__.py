"""sbqueue: Azure Service Bus partitioned queues and topics on Spark and Delta Lake.

This release has the foundation: namespaces, queue administration and the Spark-native
DataFrame API. The azure-servicebus shaped message client arrives with its own issue.
"""

from __future__ import annotations

from sbqueue.engine import Entity, Namespace, SendResult, SettleResult
from sbqueue.management import ServiceBusAdministrationClient

__all__ = ["Entity", "Namespace", "SendResult", "ServiceBusAdministrationClient", "SettleResult"]
__version__ = "0.1.0"
