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
import time
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
# How often a barrier stage may run before the run fails: the first attempt and one restart when a task or
# executor is lost (docs/cluster.md, "When an executor dies"). `rbench run --stage-attempts N`, --conf or
# spark-submit --conf set it instead; Spark's own default, 4, would run a doomed load four times.
STAGE_ATTEMPTS_KEY = "spark.stage.maxConsecutiveAttempts"
DEFAULT_STAGE_ATTEMPTS = 2


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
        if STAGE_ATTEMPTS_KEY not in (conf or {}) and not _preset(STAGE_ATTEMPTS_KEY):
            builder = builder.config(STAGE_ATTEMPTS_KEY, str(DEFAULT_STAGE_ATTEMPTS))
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _preset(key: str) -> bool:
    """True when spark-submit (its --conf, spark-defaults.conf) already set ``key``: rbench's default yields to it.

    Only under spark-submit, whose JVM exists before the session: attaching to it costs nothing,
    while starting a JVM here would start it without the session's options."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return False
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return bool(SparkConf().contains(key))


def stage_attempts_allowed(session: Any) -> int:
    """How many times a barrier stage of this session may run (spark.stage.maxConsecutiveAttempts; Spark's default 4)."""
    try:
        return int(session.sparkContext.getConf().get(STAGE_ATTEMPTS_KEY, "4"))
    except ValueError:
        return 4


def run_partition(plans: Any) -> Any:
    """Barrier-stage body: run each TaskPlan of this partition (there is exactly one)."""
    from pyspark import BarrierTaskContext

    from rbench.runtime.task import run_task

    ctx = BarrierTaskContext.get()
    # unique in the application and larger for every task of a restarted stage: names the attempt's folder
    # and tells the driver which attempt a control line comes from (Python's TaskContext has no stage attempt)
    attempt = ctx.taskAttemptId()
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


def _one_key(result: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 0, result


def submit_barrier_stage(session: Any, plans: list[Any], group: str | None = None) -> list[dict[str, Any]]:
    """Run one TaskPlan per Spark task in a barrier stage; all tasks start together. Results by task.

    The results leave the barrier stage through a one-partition shuffle, which makes it a
    ShuffleMapStage: Spark restarts a failed barrier ShuffleMapStage (every task, as a new
    attempt, up to spark.stage.maxConsecutiveAttempts), but aborts the job when a barrier
    ResultStage fails ("Could not recover from a failed barrier ResultStage"). The shuffle moves
    a few small dicts and its reading stage runs in the JVM only. ``group`` names the Spark job
    group, so ``stage_tasks`` can tell afterwards what every attempt did. Spark's own errors come
    back as one RbenchError line (``unwrap_spark_error``)."""
    sc = session.sparkContext
    rdd = sc.parallelize(plans, len(plans))
    if group is not None:
        sc.setJobGroup(group, f"rbench barrier stage {group}")
    try:
        pairs = rdd.barrier().mapPartitions(run_partition).map(_one_key).partitionBy(1).collect()
        return sorted((r for _, r in pairs), key=lambda r: int(r.get("task", 0)))
    except RbenchError:
        raise
    except Exception as exc:  # Py4J / Spark errors carry Java tracebacks: keep one line
        raise unwrap_spark_error(exc) from None
    finally:
        if group is not None:
            with contextlib.suppress(Exception):
                sc._jsc.clearJobGroup()


def stage_tasks(session: Any, group: str) -> list[dict[str, Any]]:
    """Every task attempt Spark ran for the barrier stage of job group ``group``, by stage attempt.

    Each: stage_attempt, task (partition), attempt (task attempt id), status (success, failed,
    killed, running), reason (one line, for a task that did not succeed), executor, host. Read
    from Spark's status store, the data behind its UI, which Spark keeps also with the UI off; it
    is not a public API, so any error gives [] (run.json then has the control channel's view only)."""
    try:
        sc = session.sparkContext
        tracker = sc.statusTracker()
        stage_ids: list[int] = []
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            stage_ids += [int(s) for s in (info.stageIds if info is not None else [])]
        if not stage_ids:
            return []
        stage = min(stage_ids)        # the barrier stage; the stage reading its results comes after it
        stage_info = tracker.getStageInfo(stage)
        if stage_info is None:
            return []
        store = sc._jsc.sc().statusStore()
        out: list[dict[str, Any]] = []
        for stage_attempt in range(int(stage_info.currentAttemptId) + 1):
            tasks = store.taskList(stage, stage_attempt, 1 << 20)
            for i in range(tasks.size()):
                t = tasks.apply(i)
                error = t.errorMessage()
                out.append({"stage_attempt": stage_attempt, "task": int(t.index()), "attempt": int(t.taskId()),
                            "status": str(t.status()).lower(), "executor": str(t.executorId()), "host": str(t.host()),
                            "reason": failure_line(str(error.get())) if error.isDefined() else None})
        return out
    except Exception:       # an internal API of Spark's: its absence must not fail the run
        return []


class StageAttempts:
    """Which attempt of the barrier stage of job group ``group`` a task attempt id belongs to, asked of Spark.

    Python's TaskContext does not tell a task its stage attempt, and a task attempt id alone does
    not say which stage attempt it came from: the start gate asks this (rbench.live.control)."""

    def __init__(self, session: Any, group: str, tries: int = 5, pause_s: float = 0.1) -> None:
        self.session, self.group, self.tries, self.pause_s = session, group, tries, pause_s

    def __call__(self, task_attempt_id: int) -> int | None:
        for i in range(self.tries):      # Spark's status store learns of a task from its listener bus, a moment late
            if i:
                time.sleep(self.pause_s)
            found = next((t["stage_attempt"] for t in stage_tasks(self.session, self.group)
                          if t["attempt"] == task_attempt_id), None)
            if found is not None:
                return int(found)
        return None


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


def total_slots(session: Any) -> int:
    """Task slots the cluster offers now (local[N]: N; standalone/YARN/k8s: executor cores)."""
    return int(session.sparkContext.defaultParallelism)
