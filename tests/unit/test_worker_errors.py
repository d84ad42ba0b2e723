"""A Python worker's failure as one line (issue 17): ``sbqueue.spark.errors``, no Spark."""

from __future__ import annotations

from sbqueue.spark.errors import worker_failure

WORKER_TEXT = """An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/usr/lib/pyspark.zip/pyspark/worker.py", line 1960, in main
    func, profiler, deserializer, serializer = read_udfs(pickleSer, infile, eval_type)
  File "/usr/lib/pyspark.zip/pyspark/serializers.py", line 454, in loads
    return cloudpickle.loads(obj, encoding=encoding)
ModuleNotFoundError: No module named 'sbqueue'

JVM stacktrace:
org.apache.spark.SparkException: Job aborted due to stage failure
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)
"""


def test_a_missing_module_names_the_exception_message_and_interpreter() -> None:
    line = worker_failure(WORKER_TEXT, "/usr/bin/python3")
    assert line is not None
    assert line.startswith("ModuleNotFoundError: No module named 'sbqueue' in Spark's "
                           "Python workers: they ran /usr/bin/python3")
    assert "spark.pyspark.python" in line and "\n" not in line


def test_another_worker_exception_is_named_without_advice() -> None:
    text = WORKER_TEXT.replace("ModuleNotFoundError: No module named 'sbqueue'",
                               "ZeroDivisionError: division by zero")
    assert worker_failure(text) == "ZeroDivisionError: division by zero in Spark's Python workers"


def test_other_errors_are_not_worker_failures() -> None:
    assert worker_failure("[DELTA_CONCURRENT_APPEND] Files were added") is None
