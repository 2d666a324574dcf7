"""Spark session set-up, and the one place where errors cross Spark.

Shared by the run job, the reduce job and the tests; the only module besides jobs/ and
rbench/reduce that imports pyspark. An executor task wraps the RbenchError it raises in a
marked line (``wrap_task_error``); the coordinator pulls that line back out of Spark's Java
traceback (``unwrap_spark_error``), so a user reads one line, not a Py4J stack.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rbench.errors import ConfigError, RbenchError

ERROR_MARK = "RBENCH-ERROR: "        # lets the coordinator find our one-line message in Spark's traceback

# Defaults suited to one small machine; spark-submit --conf or conf/spark-defaults.conf override.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter and keep traffic on loopback."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def jvm_log_path() -> Path:
    """Where the JVM's own stderr goes when rbench starts it (its start-up banner and any Java output)."""
    return Path(tempfile.gettempdir()) / f"rbench-spark-{os.getuid()}.log"


@contextlib.contextmanager
def _jvm_stderr_to_log() -> Iterator[None]:
    """Point fd 2 at jvm_log_path() while the JVM is launched, so the child keeps that as its stderr.

    The JVM prints a banner (incubator modules, default log level) before any log4j configuration
    applies; on the CLI a user should read rbench's one line, not three JVM lines before it.
    RBENCH_SPARK_LOG=verbose leaves the JVM's stderr on the terminal."""
    if os.environ.get("RBENCH_SPARK_LOG") == "verbose":
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(jvm_log_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def local_session(master: str | None = None, app_name: str = "rbench", conf: dict[str, str] | None = None) -> Any:
    """Get or create a SparkSession; ``master`` None keeps whatever spark-submit set."""
    prepare_environment()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if os.environ.get("RBENCH_SPARK_LOG") != "verbose":
        log_conf = Path(__file__).with_name("log4j2.properties")
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log_conf}")
    if master:
        builder = builder.master(master)
    defaults = dict(LOCAL_DEFAULTS)
    if (master or "").startswith("local"):
        # executors are this interpreter: fork task workers from a daemon that has the runtime imported
        defaults["spark.python.daemon.module"] = "rbench.runtime.daemon"
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    with _jvm_stderr_to_log():
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def run_partition(plans: Any) -> Any:
    """Barrier-stage body: run each TaskPlan of this partition (there is exactly one)."""
    from pyspark import BarrierTaskContext

    from rbench.runtime.task import run_task

    ctx = BarrierTaskContext.get()
    attempt = ctx.taskAttemptId()   # unique and increasing across stage retries: the latest attempt wins
    for plan in plans:
        try:
            yield run_task(plan, attempt=attempt, barrier=ctx.barrier, all_gather=ctx.allGather)
        except RbenchError as exc:
            raise wrap_task_error(exc) from None


def wrap_task_error(exc: RbenchError) -> RuntimeError:
    """Executor side: an error whose one line (and type) survive Spark's Java traceback."""
    return RuntimeError(f"{ERROR_MARK}{type(exc).__name__}: {exc}")


def unwrap_spark_error(exc: BaseException) -> RbenchError:
    """Coordinator side: our one-line message (as its own type), or Spark's first line, out of a Py4J error."""
    from rbench import errors

    text = str(exc)
    if ERROR_MARK in text:
        line = text.split(ERROR_MARK, 1)[1].splitlines()[0]
        kind, sep, message = line.partition(": ")
        cls = getattr(errors, kind, None) if sep else None
        if isinstance(cls, type) and issubclass(cls, RbenchError):
            return cls(message)
        return RbenchError(line)
    if "barrier" in text.lower() and "slots" in text.lower():
        return ConfigError("tasks: the Spark cluster has fewer free task slots than the barrier stage needs")
    cause = task_exception(text)
    if cause is not None:
        kind, message = cause
        advice = _ADVICE.get(kind, "")
        if kind in ("ModuleNotFoundError", "ImportError") and "rbench" in message:
            advice = ("; the executors' Python cannot import rbench: install it there, or ship it with "
                      "`make dist` and spark-submit --archives (docs/cluster.md)")
        return RbenchError(f"a Spark task failed: {kind}: {message[:300]}{advice}")
    first = next((ln for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return RbenchError(f"Spark job failed: {first[:300]} (the JVM's output: {jvm_log_path()})")


# a Python exception line inside Spark's Java text: "ValueError: message" or "pkg.mod.SomeError: message"
_PY_EXC = re.compile(r"^\s*((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)): ?(.*)$")
_ADVICE = {
    "MemoryError": "; give the executors more memory (spark.executor.memory) or run fewer producers per task",
    "PermissionError": "; the executors cannot write the output directory: use a path every executor can write",
}


def task_exception(text: str) -> tuple[str, str] | None:
    """(type, message) of the Python exception that ended a Spark task, from Spark's error text; None if none.

    Spark wraps a task's Python traceback in a PythonException inside a Py4J error; the task's own
    exception is the last exception line of that traceback."""
    start = text.find("PythonException")
    if start < 0:
        return None
    found = None
    for line in text[start:].splitlines():
        if line.lstrip().startswith(("at ", "File ", "Traceback", "org.apache.spark.api.python.PythonException")):
            if found is not None and line.lstrip().startswith("at "):
                break              # the Java frames after the Python traceback
            continue
        match = _PY_EXC.match(line)
        if match and not match.group(1).startswith(("org.", "java.", "py4j.")):
            found = (match.group(1).rsplit(".", 1)[-1], match.group(2).strip())
    return found


def submit_barrier_stage(session: Any, plans: list[Any]) -> list[dict[str, Any]]:
    """Run one TaskPlan per Spark task in a barrier stage; all tasks start together.

    Spark's own errors come back as one RbenchError line (``unwrap_spark_error``)."""
    sc = session.sparkContext
    rdd = sc.parallelize(plans, len(plans))
    try:
        results: list[dict[str, Any]] = rdd.barrier().mapPartitions(run_partition).collect()
        return results
    except RbenchError:
        raise
    except Exception as exc:  # Py4J / Spark errors carry Java tracebacks: keep one line
        raise unwrap_spark_error(exc) from None


def total_slots(session: Any) -> int:
    """Task slots the cluster offers now (local[N]: N; standalone/YARN/k8s: executor cores)."""
    return int(session.sparkContext.defaultParallelism)
