"""A task's error across Spark, as one line: marked on the executor, found again in Spark's Java traceback.

An RbenchError a task raises leaves the executor as a RuntimeError whose text starts with a marked line
(``wrap_task_error``); the coordinator pulls that line back out of the Py4J error Spark raises
(``unwrap_spark_error``), so a user reads one line, not a Java stack. A task that died of another Python
exception is named by its last exception line (``task_exception``); anything else by Spark's first line.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rbench.errors import ConfigError, RbenchError

ERROR_MARK = "RBENCH-ERROR: "        # lets the coordinator find our one-line message in Spark's traceback


def jvm_log_path() -> Path:
    """Where the JVM's own stdout and stderr go when rbench starts it (its start-up banner, Spark's warnings,
    any Java output, the Python workers' stderr)."""
    return Path(tempfile.gettempdir()) / f"rbench-spark-{os.getuid()}.log"


def wrap_task_error(exc: RbenchError) -> RuntimeError:
    """Executor side: an error whose one line (and type) survive Spark's Java traceback."""
    return RuntimeError(f"{ERROR_MARK}{type(exc).__name__}: {exc}")


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Around a Spark action on the coordinator (a stage's collect): an RbenchError passes as it is, a Ctrl-C stays a
    Ctrl-C (``raise_if_interrupted``), any other Py4J / Spark error, which carries Java tracebacks, becomes one
    RbenchError line (``unwrap_spark_error``)."""
    try:
        yield
    except RbenchError:
        raise
    except Exception as exc:
        raise_if_interrupted(exc)
        raise unwrap_spark_error(exc) from None


def raise_if_interrupted(exc: BaseException) -> None:
    """Raise KeyboardInterrupt when ``exc`` replaced one: the user pressed Ctrl-C, not a Spark failure.

    Py4J, interrupted mid-command, shuts its sockets down inside its ``except KeyboardInterrupt``
    block; when that clean-up fails in turn (the JVM closed the socket first: "Answer from Java
    side is empty"), its network error replaces the KeyboardInterrupt, which survives only as the
    error's ``__context__``. Seen in CI on a Ctrl-C during a sweep's stage: the run reported "Spark
    job failed" instead of stopping as interrupted."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            raise KeyboardInterrupt from exc
        seen.add(id(link))
        link = link.__cause__ or link.__context__


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


def failure_line(text: str) -> str:
    """One line for why a Spark task did not succeed: our marked line, the task's Python exception, or Spark's first line."""
    if ERROR_MARK in text:
        return text.split(ERROR_MARK, 1)[1].splitlines()[0]
    cause = task_exception(text)
    if cause is not None:
        return f"{cause[0]}: {cause[1][:200]}"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    first = re.sub(r"^(?:[a-z_][\w]*\.)+(?=[A-Z])", "", first)           # org.apache.spark.SparkException → SparkException
    return first.split(". Consider setting", 1)[0][:300]
