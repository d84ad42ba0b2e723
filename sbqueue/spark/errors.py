"""What a failed Python worker said, in one line a user can act on.

PySpark reports a worker's failure as "An exception was thrown from the Python worker"
with the worker's traceback folded into the text; the useful part is the traceback's last
line (``ModuleNotFoundError: No module named 'sbqueue'``). The CLI prints that, and for a
missing module names the interpreter the workers ran and how to choose another.
"""

from __future__ import annotations

import os
import re
import shutil

__all__ = ["one_line", "worker_failure", "workers_python"]

_MARK = "thrown from the Python worker"
# The last line of a Python traceback: ``Name: message`` (a dotted name for module errors).
_LAST_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)):\s?(.*)$")


def workers_python(conf_value: str | None = None) -> str:
    """The interpreter a local session's Python workers run: ``spark.pyspark.python`` if
    known, else ``$PYSPARK_PYTHON``, else the first ``python3`` on ``PATH``."""
    chosen = conf_value or os.environ.get("PYSPARK_PYTHON")
    if chosen:
        return chosen
    return f"{shutil.which('python3') or 'python3'} (the first python3 on PATH)"


def worker_failure(text: str, python: str | None = None) -> str | None:
    """One line naming a Python worker's exception and its message, or None when ``text``
    is not a worker failure. ``python``: the workers' interpreter, named in the advice for
    a module the workers could not import."""
    if _MARK not in text:
        return None
    found = None
    python_part = text.split("JVM stacktrace:", 1)[0]
    traceback = python_part.rsplit("Traceback (most recent call last):", 1)[-1]
    for line in traceback.splitlines():
        match = _LAST_LINE.match(line.strip())
        if match:
            found = match
    if found is None:
        return "an exception in Spark's Python workers (set SBQUEUE_DEBUG=1 for the trace)"
    name, message = found.group(1).rsplit(".", 1)[-1], found.group(2).strip()
    line = f"{name}: {message[:300]} in Spark's Python workers"
    if name in ("ModuleNotFoundError", "ImportError"):
        line += (f": they ran {python or workers_python()}, which lacks it; run the "
                 "program with the interpreter that has sbqueue installed, or name one "
                 "with --conf spark.pyspark.python=/path/to/python (or PYSPARK_PYTHON)")
    return line


def one_line(exc: BaseException) -> str:
    """A Spark, Java or OS error as one line for a person (the CLI's, the explorer's): a
    Python worker's own exception and message when a worker failed, else the error's first
    line, with how to see the whole trace."""
    text = str(exc)
    worker = worker_failure(text, _session_python())
    if worker is not None:
        return worker
    first = (text.strip().splitlines() or [""])[0][:300]
    return f"{exc.__class__.__name__}: {first} (set SBQUEUE_DEBUG=1 for the trace)"


def _session_python() -> str | None:
    """The Python the active session's workers run, if a session is up."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None:
        return None
    value = active.conf.get("spark.pyspark.python", None)
    return str(value) if value else None
