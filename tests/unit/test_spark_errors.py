"""What a user reads when something fails inside Spark: one line with the task's own cause."""
from __future__ import annotations

import pytest

from rbench.errors import BrokerError, ConfigError, ConnectError, RbenchError
from rbench.spark_errors import one_line_errors, raise_if_interrupted, task_exception, unwrap_spark_error, wrap_task_error

# the shape of a Py4JJavaError's text when a barrier task's Python worker raised
JAVA_TEXT = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Could not recover from a failed barrier ResultStage.
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/usr/lib/python3/pyspark/worker.py", line 1247, in main
    func, profiler, deserializer, serializer = read_command(pickleSer, infile)
  File "/usr/lib/python3/pyspark/serializers.py", line 473, in loads
    return cloudpickle.loads(obj, encoding=encoding)
ModuleNotFoundError: No module named 'rbench'

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:581)
\tat org.apache.spark.api.python.PythonRunner$$anon$3.read(PythonRunner.scala:940)
"""


def test_the_tasks_own_exception_is_found_in_sparks_text() -> None:
    assert task_exception(JAVA_TEXT) == ("ModuleNotFoundError", "No module named 'rbench'")
    assert task_exception("py4j.protocol.Py4JError: something else") is None


def test_an_executor_that_cannot_import_rbench_gets_one_line_with_advice() -> None:
    err = unwrap_spark_error(Exception(JAVA_TEXT))
    text = str(err)
    assert "\n" not in text and "collectAndServe" not in text
    assert "ModuleNotFoundError: No module named 'rbench'" in text and "make dist" in text


def test_our_errors_cross_spark_with_their_type_and_line() -> None:
    for exc in (ConnectError("cannot connect to RabbitMQ: amqp://u:***@h:5672/: refused"),
                ConfigError("metrics_port: cannot listen on port 9100 (Address already in use)"),
                BrokerError("declare queue 'q': broker closed the channel with 406 PRECONDITION_FAILED")):
        wrapped = wrap_task_error(exc)
        java = f"An error occurred while calling o42.collect.\n: org.apache.spark.SparkException: ...\n" \
               f"org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n" \
               f"  File \"x.py\", line 1, in f\nRuntimeError: {wrapped}\n\tat org.apache.spark.X(Y.scala:1)\n"
        back = unwrap_spark_error(Exception(java))
        assert type(back) is type(exc) and str(back) == str(exc)


def test_an_unknown_spark_failure_is_one_line_pointing_at_the_jvm_log() -> None:
    err = unwrap_spark_error(Exception("An error occurred while calling o1.start.\n: java.lang.OutOfMemoryError\n\tat x"))
    assert "\n" not in str(err) and "rbench-spark-" in str(err)


def _py4j_cleanup_failure() -> Exception:
    """The error Py4J leaves when its clean-up after a Ctrl-C fails: a network error whose context is the Ctrl-C."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ConnectionError("Answer from Java side is empty")  # noqa: B904 (the chain is Py4J's, as it is)
    except ConnectionError as exc:
        return exc


def test_a_ctrl_c_that_py4j_turned_into_a_network_error_stays_a_ctrl_c() -> None:
    with pytest.raises(KeyboardInterrupt):
        raise_if_interrupted(_py4j_cleanup_failure())
    wrapped = RuntimeError("An error occurred while calling o42.collect")
    wrapped.__cause__ = _py4j_cleanup_failure()
    with pytest.raises(KeyboardInterrupt):
        raise_if_interrupted(wrapped)


def test_a_spark_failure_without_a_ctrl_c_is_left_to_unwrap() -> None:
    plain = RuntimeError(JAVA_TEXT)
    raise_if_interrupted(plain)          # returns: not an interrupt
    looped = RuntimeError("loop")
    looped.__context__ = ValueError("inner")
    looped.__context__.__context__ = looped   # a cycle must not hang the walk
    raise_if_interrupted(looped)


def test_around_a_stage_a_spark_error_is_one_line_ours_passes_and_a_ctrl_c_stays_one() -> None:
    with pytest.raises(RbenchError, match="ModuleNotFoundError") as caught:
        with one_line_errors():
            raise RuntimeError(JAVA_TEXT)
    assert "\n" not in str(caught.value) and caught.value.__cause__ is None
    with pytest.raises(BrokerError, match="^refused$"):
        with one_line_errors():
            raise BrokerError("refused")
    with pytest.raises(KeyboardInterrupt):
        with one_line_errors():
            raise _py4j_cleanup_failure()
