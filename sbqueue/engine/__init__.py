"""Layer 4: Service Bus operations on DataFrames (the Spark-native API)."""

from __future__ import annotations

from sbqueue.engine.entity import Entity, SendResult, SettleResult
from sbqueue.engine.namespace import Namespace
from sbqueue.engine.topics.topic import Topic

__all__ = ["Entity", "Namespace", "SendResult", "SettleResult", "Topic"]
