"""The explorer: a namespace in a browser (``sbqueue explorer``) and its Prometheus
metrics (``/metrics``, or ``expose`` in an application's own process). Docs:
docs/explorer.md."""

from sbqueue.explorer.app import create_app
from sbqueue.explorer.guard import Guard
from sbqueue.explorer.metrics import NamespaceCollector, OperationMetrics, expose

__all__ = ["Guard", "NamespaceCollector", "OperationMetrics", "create_app", "expose"]
