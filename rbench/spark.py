"""Spark session set-up, and the stages a run submits.

Shared by the run job, the reduce job and the tests; the only module besides jobs/ and
rbench/reduce that imports pyspark. Errors cross Spark as one line (rbench.spark_errors).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rbench.errors import ConfigError, RbenchError
from rbench.spark_errors import failure_line, jvm_log_path, one_line_errors, wrap_task_error

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
# The driver JVM a run starts (SparkStart) compiles with C1 only: its work is seconds of start-up and scheduling,
# where C2's compilations and the profiling that feeds them cost more than they return. Measured on this 2-core
# machine (docs/timing.md): command -> first message 4.9 s against 6.0 s (medians of 3). A JVM started for a reduce
# (local_session: `rbench reduce`, the sweeps' reduces) keeps the default tiers: passes in Spark run for minutes
# there, 1.15x (20M rows, one reduce in a fresh JVM) to 1.5x (5M rows, a warm JVM) faster with C2. So does a run's
# JVM under RBENCH_JVM_FULL_JIT=1, which a run whose samples exceed the driver's budget may want.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
FULL_JIT_ENV = "RBENCH_JVM_FULL_JIT"
DAEMON_KEY = "spark.python.daemon.module"
DAEMON_MODULE = "rbench.runtime.daemon"
DEFAULT_STAGE_ATTEMPTS = 2


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter and keep traffic on loopback."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _verbose() -> bool:
    """RBENCH_SPARK_LOG=verbose: the JVM's output on the terminal, Spark's own log4j profile."""
    return os.environ.get("RBENCH_SPARK_LOG") == "verbose"


def session_options(master: str | None, app_name: str, conf: dict[str, str] | None,
                    for_run: bool = False) -> dict[str, str]:
    """Every Spark option rbench sets when it creates the session: its defaults, then ``conf`` over them.
    ``for_run``: the JVM of a load run, whose work is its start and scheduling: it compiles with C1 only
    (QUICK_JIT), and writes the class-data archive as it exits when there is none (rbench.jvm_cds), since
    it loads what a run needs."""
    from rbench import jvm_cds
    from rbench.jvm_launch import spark_home

    options: dict[str, str] = {"spark.app.name": app_name}
    java = []
    if not _verbose():
        java.append(f"-Dlog4j2.configurationFile=file:{Path(__file__).with_name('log4j2.properties')}")
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):          # rbench starts the JVM (not spark-submit)
        java.append(jvm_cds.java_options(spark_home(), for_run))
        if for_run and os.environ.get(FULL_JIT_ENV, "").lower() not in ("1", "true", "yes", "on"):
            java.append(QUICK_JIT)
    if any(java):
        options["spark.driver.extraJavaOptions"] = " ".join(j for j in java if j)
    if master:
        options["spark.master"] = master
    defaults = dict(LOCAL_DEFAULTS)
    if (master or "").startswith("local"):
        # executors are this interpreter: fork task workers from a daemon that has the runtime imported
        defaults[DAEMON_KEY] = DAEMON_MODULE
    options.update({**defaults, **(conf or {})})
    if STAGE_ATTEMPTS_KEY not in (conf or {}) and not _preset(STAGE_ATTEMPTS_KEY):
        options[STAGE_ATTEMPTS_KEY] = str(DEFAULT_STAGE_ATTEMPTS)
    return options


_START_LOCK = threading.Lock()       # one start at a time: a session asked for while SparkStart is starting waits


def _start_context(options: dict[str, str]) -> Any:
    """The SparkContext with ``options``, its JVM started with stdout and stderr in jvm_log_path().

    The JVM prints a banner (incubator modules, "Setting default log level") and the launcher its own
    lines before any log4j configuration applies; a user reads rbench's lines, not the JVM's. The JVM
    inherits the log file as its stdout and stderr from the start (no process-wide redirect of this
    process's stderr, so the coordinator's own lines stay on the terminal while the JVM starts in the
    background)."""
    with _START_LOCK:
        return _start_locked(options, _launch(options), None)


def _jvm_running() -> bool:
    """A driver JVM exists for this process already: spark-submit's, or one an earlier session started."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return True
    if "pyspark" not in sys.modules:
        return False                        # nothing can have started one without importing pyspark
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def _launch(options: dict[str, str], daemons: list[Any] | None = None, mark: Any = None) -> Any:
    """Launch the driver JVM (rbench.jvm_launch: before pyspark is imported), unless one runs; None then.

    ``daemons``: a run's start (SparkStart) on a local master also pre-starts Spark's Python daemon beside
    the JVM (rbench.runtime.zygote), appended there; ``mark(label, at)`` is told its instants."""
    from rbench.jvm_launch import JvmLaunch

    if _jvm_running():
        return None
    prepare_environment()                   # before the JVM: it and its Python workers inherit these
    log = None if _verbose() else os.open(jvm_log_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        zygote = None
        if daemons is not None and options.get(DAEMON_KEY) == DAEMON_MODULE:
            from rbench.runtime.zygote import ENV, Zygote

            zygote = Zygote.start(log, mark)
            if zygote is not None:
                daemons.append(zygote)
                os.environ[ENV] = zygote.path     # the JVM's environment, and so its daemon's
        try:
            return JvmLaunch(options, log, "the terminal" if log is None else str(jvm_log_path()))
        finally:
            if zygote is not None:
                os.environ.pop(ENV, None)
                zygote.watch()
    finally:
        if log is not None:
            os.close(log)


@contextlib.contextmanager
def _attaching(port: int, secret: str) -> Iterator[None]:
    """pyspark's launch_gateway connects to a JVM that exists when these are set (as spark-submit sets them)."""
    keys = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(zip(keys, (str(port), secret)))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _start_locked(options: dict[str, str], jvm: Any, mark: Any) -> Any:
    """The context on the JVM ``jvm`` (a JvmLaunch) started, or on the one running when it is None.
    ``mark(label, at)`` is told when the JVM answers."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    from rbench import jvm_cds
    from rbench.jvm_launch import spark_home

    prepare_environment()
    sconf = SparkConf()
    for key, value in options.items():
        sconf.set(key, value)
    if jvm is not None and SparkContext._gateway is not None:
        jvm.stop()                                # another session started one meanwhile: use that
        jvm = None
    if jvm is not None:
        try:
            port, secret = jvm.address()
            with _attaching(port, secret):
                gateway = launch_gateway(sconf)  # type: ignore[no-untyped-call]
        except BaseException:
            jvm.stop()
            raise
        gateway.proc = jvm.proc
        SparkContext._ensure_initialized(gateway=gateway)
        if mark is not None:
            if jvm.listening_at is not None:     # the JVM's own start, apart from this process's import of pyspark
                mark("JVM listening (its gateway's port written)", jvm.listening_at)
            mark("JVM started (py4j gateway answers)", time.time())
    sc = SparkContext.getOrCreate(sconf)
    sc.setLogLevel("ERROR")
    if jvm is not None and jvm_cds.WRITE_OPTION in options.get("spark.driver.extraJavaOptions", ""):
        # this process started the JVM that writes the archive; once the context is up, the JVM has loaded what a start needs: worth keeping for the next run
        jvm_cds.keep_at_exit(spark_home(), jvm.proc.pid)
    return sc


def local_session(master: str | None = None, app_name: str = "rbench", conf: dict[str, str] | None = None) -> Any:
    """Get or create a SparkSession (the SQL session, for the reduce); ``master`` None keeps whatever spark-submit set."""
    from pyspark.sql import SparkSession

    options = session_options(master, app_name, conf)
    _start_context(options)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()         # on the context above


class SparkStart:
    """The SparkContext started on a thread of its own, while the coordinator probes the brokers and plans.

    A run's barrier stages need only the SparkContext (``sparkContext`` waits for it). The SQL session
    (Catalyst, the session state) took as long again to build here, and only a reduce whose samples
    are too large for the driver uses it: ``session()`` builds it then, on the same context. Errors of
    the start are raised where the context is first asked for, on the coordinator's thread."""

    def __init__(self, master: str | None, app_name: str, conf: dict[str, str] | None = None,
                 explicit_master: bool = False) -> None:
        self._options = session_options(master, app_name, conf, for_run=True)
        # Spark keeps one context per process and getOrCreate hands back the running one whatever its
        # master: a master the user named (--master) and did not get is refused, not silently replaced
        self._explicit = master if explicit_master else None
        self.marks: list[tuple[str, float]] = []     # (what, wall-clock s) of the start, for --timings
        self._done = threading.Event()
        self._abandoned = threading.Event()
        self._made = False                           # this start created the context (abandon may stop it)
        self._context: Any = None
        self._error: BaseException | None = None
        self._daemons: list[Any] = []                # the pre-started Python daemon (rbench.runtime.zygote), if any
        self._jvm: Any = None                        # the JVM this start launched (rbench.jvm_launch), if any
        self._thread = threading.Thread(target=self._start, name="rbench-spark-start", daemon=True)

    def start(self) -> SparkStart:
        """Launch the JVM (and the pre-started daemon) from here, at once, then import pyspark whole; the wait for
        the JVM and the context are the thread's.

        Why pyspark's import is not the thread's: pyspark imports itself in a cycle (pyspark/__init__ →
        pyspark.sql → pyspark), and two threads importing it at once can each get the other's half-made module
        ("cannot import name 'SQLContext' from partially initialized module 'pyspark.sql'"). Seen in `make run`:
        the coordinator's thread imported the reduce (which imports pyspark.sql) while this thread imported
        pyspark. Here it costs ~0.15 s while the JVM, launched first, boots."""
        try:
            with _START_LOCK:
                self._jvm = _launch(self._options, self._daemons, self._mark)
            import pyspark.sql  # noqa: F401
        except BaseException as exc:          # raised where the context is asked for, as any error of the start
            self._error = exc
        self._thread.start()
        return self

    def _mark(self, what: str, at: float) -> None:
        self.marks.append((what, at))

    def _start(self) -> None:
        try:
            if self._error is not None:
                return
            from pyspark import SparkContext

            with _START_LOCK:
                self._made = SparkContext._active_spark_context is None     # not a context someone else uses
                self._context = _start_locked(self._options, self._jvm, self._mark)
                self.marks.append(("SparkContext ready", time.time()))
                if self._explicit and not self._made and self._context.master != self._explicit:
                    raise ConfigError(f"--master {self._explicit}: this process already runs a SparkContext on "
                                      f"{self._context.master} (Spark keeps one per process); ask for that master "
                                      f"or stop the running context first")
                if self._abandoned.is_set():
                    self._stop()
        except BaseException as exc:          # handed to the thread that asks for the context
            self._error = exc
        finally:
            if self._abandoned.is_set() or self._error is not None:
                for daemon in self._daemons:
                    daemon.close()
            self._done.set()

    def abandon(self) -> None:
        """The run ended before it used Spark (a broker that is down, a refused limit): stop the context this
        start made, now or as soon as it is up, so a later session in this process (a test's, a job's) starts
        clean. The command-line process exits anyway and its JVM with it; nothing here waits for the JVM."""
        self._abandoned.set()
        for daemon in self._daemons:
            daemon.close()
        if self._done.is_set():
            with _START_LOCK:
                self._stop()

    def _stop(self) -> None:
        context, self._context = self._context, None
        if context is not None and self._made:
            with contextlib.suppress(Exception):
                context.stop()

    @property
    def sparkContext(self) -> Any:       # the name SparkSession gives it: the run code takes either
        self._done.wait()
        if self._error is not None:
            raise self._error
        if self._context is None:
            raise RbenchError("the Spark context was stopped: this run was abandoned before it used Spark")
        return self._context

    def session(self) -> Any:
        """The SQL session on this context, built on first use."""
        _ = self.sparkContext          # waits for the context, raises its error
        from pyspark.sql import SparkSession

        builder = SparkSession.builder
        for key, value in self._options.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()


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
        with one_line_errors():
            pairs = rdd.barrier().mapPartitions(run_partition).map(_one_key).partitionBy(1).collect()
        return sorted((r for _, r in pairs), key=lambda r: int(r.get("task", 0)))
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


def total_slots(session: Any) -> int:
    """Task slots the cluster offers now (local[N]: N; standalone/YARN/k8s: executor cores)."""
    return int(session.sparkContext.defaultParallelism)
