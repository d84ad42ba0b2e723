"""Spark jobs: the same ``main`` functions run under spark-submit (``jobs/*.py``), as
console entry points of the wheel (``sbqueue-forward`` ...; Databricks wheel tasks) and
behind ``sbqueue forward`` / ``sbqueue maintain``. Each takes ``--namespace``, prints a
one-line JSON summary, logs progress, and exits 2 with a one-line reason on bad input."""

from sbqueue.jobs.runner import JobError, run_job

__all__ = ["JobError", "run_job"]
