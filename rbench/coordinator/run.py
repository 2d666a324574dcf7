"""The coordinator (the Spark driver side) of `rbench run`: one barrier stage per cluster.

Clusters run one after another (they would otherwise compete for the same client
CPUs and skew each other). Before any Spark work, every cluster is probed with the
workload's driver so a broker that is down or refuses credentials fails in seconds
with one line, not after a Spark stage and a Java traceback.
"""
from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rbench.config.fds import raise_for_control
from rbench.config.load import workload_hash
from rbench.config.model import Workload
from rbench.config.types import ClusterPlan, RunPlan
from rbench.coordinator import attempts, orphans
from rbench.coordinator.broker_identity import BrokerIdentity, from_server_properties
from rbench.coordinator.broker_room import check_broker_room
from rbench.coordinator.options import Listening
from rbench.coordinator.progress import ProgressPrinter
from rbench.coordinator.timings import Timings
from rbench.drivers.base import load_driver
from rbench.errors import BrokerError, ConfigError, ConnectError, RbenchError, SinkError
from rbench.live.control import ControlServer
from rbench.perftest.lines import CsvWriter, PerfTestOutput
from rbench.plan import cluster_target, default_task_count, expected_queues, plan_run
from rbench.samples.broker_facts import BrokerFacts
from rbench.samples.faults import FaultRecord
from rbench.samples.record import BrokerMetricsRecord, PauseRecord, RunRecord
from rbench.samples.runinfo import STOPPED_BY_INTERRUPT, STOPPED_BY_SCHEDULE, RunInfo, new_run_id
from rbench.samples.tasks import DRAINED, TaskResult
from rbench.samples.windows import STOPPED_BY_COUNT
from rbench.spark_errors import ERROR_MARK, unwrap_spark_error

PROBE_TIMEOUT_S = 10.0


@dataclass
class RunResult:
    run_dir: Path
    status: str
    record: RunRecord          # run.json as written at the end


async def _probe(workload: Workload, cluster: str) -> BrokerIdentity:
    driver = load_driver(workload.resolved_driver())
    try:
        await asyncio.wait_for(driver.open(cluster_target(workload, cluster)), PROBE_TIMEOUT_S)
        return from_server_properties(driver.server_properties)
    except asyncio.TimeoutError:
        raise BrokerError(f"cluster {cluster}: no answer from the broker within {PROBE_TIMEOUT_S:.0f} s") from None
    finally:
        try:
            await asyncio.wait_for(driver.aclose(), 5)
        except Exception:
            pass


def probe_clusters(workload: Workload) -> dict[str, BrokerIdentity]:
    """Connect once to every cluster; the first that fails raises, named. Returns who answered, per cluster (the
    broker's own word at connect time: version, cluster name), so the checks after the probe need no second connection.

    With ``startup_timeout`` (PerfTest --servers-startup-timeout) a broker that refuses or
    does not answer is retried every second until that many seconds have passed."""
    answered: dict[str, BrokerIdentity] = {}
    for c in workload.clusters:
        deadline = time.monotonic() + workload.startup_timeout
        while True:
            try:
                answered[c.name] = asyncio.run(_probe(workload, c.name))
                break
            except ConnectError as exc:
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    time.sleep(min(1.0, remaining))
                    continue
                message = str(exc) if str(exc).startswith("cluster ") else f"cluster {c.name}: {exc}"
                waited = f" (retried for {workload.startup_timeout:g} s)" if workload.startup_timeout else ""
                raise ConnectError(message + waited) from None
            except BrokerError as exc:
                message = str(exc) if str(exc).startswith("cluster ") else f"cluster {c.name}: {exc}"
                raise type(exc)(message) from None
    return answered


def _printer(workload: Workload, control: ControlServer, plan: RunPlan, out: TextIO | None, show: bool) -> ProgressPrinter:
    """The status-line printer the workload's progress section asks for (and its CSV file)."""
    pr = workload.progress
    fmt = PerfTestOutput(pr.id or workload.name, pr.latency_unit, producers=workload.producers > 0,
                         consumers=workload.consumers > 0, confirm=workload.publisher.confirm,
                         mandatory=workload.publisher.mandatory)
    csv = None
    if pr.csv:
        try:
            csv = CsvWriter(pr.csv, fmt)
        except OSError as exc:
            raise ConfigError(f"progress.csv: cannot write {pr.csv!r} ({exc.strerror or exc})") from None
    return ProgressPrinter(control.board, plan, out=out, interval_s=pr.interval, style=pr.format,
                           perftest=fmt, csv=csv, show=show)


def _mark_task_instants(timings: Timings, cluster: str, first_seen: float | None, results: list[TaskResult]) -> None:
    if first_seen is not None:
        timings.mark(f"{cluster}: first task connected to the coordinator", first_seen)
    for what in ("worker process started", "task started", "connected", "declared", "consumers and publishers ready", "t0 agreed with the other tasks"):
        times = [r.instants[what] for r in results if what in r.instants]
        if times:
            timings.mark(f"{cluster}: {what} (last task)", max(times))
    t0 = _first_t0(results)
    if t0:
        timings.mark(f"{cluster}: load started (t0, first message due)", t0 / 1e9)
    end, _ = _load_end(results)
    if end:
        timings.mark(f"{cluster}: load ended", end / 1e9)
    drained = [r.instants[DRAINED] for r in results if DRAINED in r.instants]
    if drained:
        timings.mark(f"{cluster}: {DRAINED} (last task)", max(drained))
    timings.mark(f"{cluster}: stage ended (samplers stopped, run.json has the tasks' results)")


def _task_results(cluster: str, returned: list[dict[str, Any]]) -> list[TaskResult]:
    """The stage's results, typed where they arrive (the executor side builds plain dicts: rbench.runtime.task)."""
    try:
        return [TaskResult.from_json(r, f"task result {i}") for i, r in enumerate(returned)]
    except SinkError as exc:
        raise SinkError(f"cluster {cluster}: a task returned a result this coordinator cannot read "
                        f"({str(exc).removeprefix('run.json: ')})") from None


def _first_t0(results: list[TaskResult]) -> int | None:
    """The stage's t0: every task of a stage attempt agreed on it at the start gate."""
    return min((r.t0_ns for r in results if r.t0_ns), default=None)


def _load_end(results: list[TaskResult]) -> tuple[int | None, str]:
    """When the cluster's load ended (the last task to stop) and why (rbench.samples.runinfo.STOPPED_BY_*)."""
    loaded = [r for r in results if r.producers] or results      # tasks with only consumers follow the others
    ends = [r.load_end_ns for r in loaded if r.load_end_ns]
    reasons = {r.stopped_by for r in loaded if r.stopped_by}
    if STOPPED_BY_INTERRUPT in reasons:
        reason = STOPPED_BY_INTERRUPT
    elif reasons == {STOPPED_BY_COUNT}:
        reason = STOPPED_BY_COUNT
    else:
        reason = STOPPED_BY_SCHEDULE
    return (max(ends) if ends else None), reason


def _producer_span(results: list[TaskResult]) -> tuple[int | None, int | None]:
    """When every producer of the cluster was due to be sending: the latest first due send of any task, and
    the earliest stop of any producer (rbench.runtime.publishers.Published)."""
    dues = [r.producers_due_ns for r in results if r.producers and r.producers_due_ns]
    stops = [r.producers_first_stop_ns for r in results if r.producers and r.producers_first_stop_ns]
    return max(dues, default=None), min(stops, default=None)


class _Watchers:
    """What runs on the coordinator beside a cluster's stage: the faults, the broker sampler and the consumer pause."""

    def __init__(self, workload: Workload, run_dir: Path, run_id: str, cluster: ClusterPlan, control: ControlServer,
                 routes: dict[int, list[str]] | None, steps: int, out: TextIO | None) -> None:
        from rbench.coordinator.broker import BrokerSampler
        from rbench.coordinator.faults import FaultController
        from rbench.coordinator.pause import PauseController
        from rbench.faults.executor import make_executor

        target = cluster.target
        self.sampler: BrokerSampler | None = None
        self.pauser: PauseController | None = None
        self.faults: FaultController | None = None
        self.fault_records: list[FaultRecord] = []
        self.pause: PauseRecord | None = None
        self.broker_metrics: BrokerMetricsRecord | None = None
        if cluster.faults and cluster.fault_control is not None:
            executor = make_executor(cluster.fault_control, target.name)
            problem = executor.check(sorted({f.node for f in cluster.faults}))
            if problem:           # before anything starts: a fault that cannot act is a broken experiment
                raise BrokerError(f"cluster {target.name}: faults: {problem}")
            self.faults = FaultController(target.name, cluster.faults, executor,
                                          lambda: control.board.t0_ns.get(target.name), out,
                                          run_dir / "faults" / f"{target.name}.log").start()
        (config,) = [c for c in workload.clusters if c.name == target.name]
        sampling = workload.broker_metrics_of(config)
        if sampling.enabled:
            # the memory breakdown costs the broker a walk of its processes: only for the memory-per-connection test
            self.sampler = BrokerSampler(run_dir, run_id, target, workload.queues.names(workload.name), sampling, out,
                                         memory_breakdown=any(t.connections.idle > 0 for t in cluster.tasks)).start()
        if workload.consumer.pause is not None:
            copies = (sum(len(q) for q in routes.values()) / len(routes)) if routes else 1.0
            self.pauser = PauseController(target.name, workload.consumer.pause, control, self.sampler, copies,
                                          steps, out).start()

    def stop(self) -> None:
        """Stop all; what run.json records for the cluster is left in ``fault_records``, ``pause`` and
        ``broker_metrics``. Nodes a fault left down are brought back first."""
        if self.faults is not None:
            self.fault_records = self.faults.stop()
        if self.pauser is not None:
            self.pause = self.pauser.stop()
        if self.sampler is not None:
            self.broker_metrics = self.sampler.stop()


class _Interrupts:
    """First Ctrl-C/SIGTERM: ask tasks to stop and flush; second: cancel the Spark job."""

    def __init__(self, control: ControlServer, session: Any, out: TextIO | None, info: RunInfo) -> None:
        self.control, self.session, self.out, self.info = control, session, out, info
        self.count = 0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count == 1:
            print("rbench: stopping — tasks are flushing their samples (again to abort)", file=self.out, flush=True)
            self.control.stop_tasks()
        else:
            # run.json says so before anything else can go wrong: a third Ctrl-C may end the process
            self.info.mark_unfinished("interrupted")
            print("rbench: aborting the Spark job", file=self.out, flush=True)
            self.session.sparkContext.cancelAllJobs()

    @property
    def interrupted(self) -> bool:
        return self.count > 0


def run_workload(workload: Workload, out_root: str | Path, session: Any, tasks: int | None = None,
                 out: TextIO | None = None, progress: bool = True, control_host: str | None = None,
                 timings: Timings | None = None, metrics_port: int | None = None, pushgateway: str | None = None,
                 metrics_linger_s: float = 0.0, queues_created: dict[str, list[str]] | None = None,
                 brokers: Mapping[str, BrokerFacts] | None = None, listening: Listening | None = None,
                 on_load_start: Callable[[], None] | None = None) -> RunResult:
    """Run every cluster of `workload` on `session`; samples land in out_root/<run_id>/.

    Call probe_clusters(workload) first for a fast, clear error when a broker is down.
    The run-wide /metrics (rbench.live.run_metrics) is served on `metrics_port` (0 = any free port;
    by default on any free port when the workload sets metrics_port), and pushed to
    `pushgateway` at the end. ``brokers``: what each cluster's broker is (rbench.coordinator.broker_facts), for run.json.
    ``listening``: the listeners' addresses and TLS (default: any address, no TLS);
    the control channel authenticates every peer either way (rbench.live.control.auth), and the peers it
    refused are in run.json's ``control_refused`` and one warning line each at the end.
    ``on_load_start`` is called (on a control thread) whenever a cluster's start gate opens.
    """
    from rbench import spark

    run_id = new_run_id(workload.name)
    run_dir = Path(out_root).resolve() / run_id
    slots = spark.total_slots(session)
    n_tasks = {c.name: tasks or default_task_count(workload, slots) for c in workload.clusters}
    for n in n_tasks.values():
        if n > slots:
            raise ConfigError(f"tasks: the run needs {n} Spark task slots at once (barrier stage) "
                              f"but the cluster offers {slots}; lower tasks or add executors")
    host = control_host or session.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")
    listening = listening or Listening()
    raise_for_control(sum(n_tasks.values()))
    control = ControlServer(host=host, tls=listening.control_tls()).start()
    access = listening.metrics_access()
    try:
        plan = plan_run(workload, run_id, str(run_dir.parent), n_tasks, control=control.endpoint,
                        metrics_access=access)
        check_broker_room(plan, brokers)          # the brokers' fds can hold the plan's connections, before any opens
    except BaseException:
        control.close()
        raise
    routes = expected_queues(workload)
    info = RunInfo(run_dir, plan, workload.model_dump(mode="json", by_alias=True), workload_hash(workload),
                   # a lost task or executor restarts a cluster's stage at most this many times in all (docs/cluster.md)
                   stage_attempts_allowed=spark.stage_attempts_allowed(session),
                   # the reduce expects each message once per queue its producer's messages are routed to (fan-out)
                   routes=routes,
                   # what a later run deletes should this coordinator die without finishing (rbench.coordinator.orphans)
                   queues_created=queues_created, coordinator=orphans.Heartbeat.identity(), brokers=brokers)
    control.board.on_restart.append(lambda *a: print(attempts.restart_line(*a), file=out, flush=True))
    if on_load_start is not None:
        control.board.on_started.append(lambda _cluster: on_load_start())
    groups: dict[str, str] = {}           # cluster → the Spark job group of its stage

    def no_restart(name: str, error: str) -> None:
        """A task failed with an error it can name (a broker refusal, bad input): it would fail again, so the
        stage is not restarted; the run ends now with that line."""
        if name in groups:
            session.sparkContext.cancelJobGroup(groups[name])
    control.board.on_error.append(no_restart)
    heartbeat = orphans.Heartbeat(run_dir).start()
    interrupts = _Interrupts(control, session, out, info)
    interrupts.install()              # before run.json exists: from then on every interrupt reaches the tasks
    info.write()
    timings = timings or Timings()
    timings.mark("run planned, run.json written")
    try:
        printer = _printer(workload, control, plan, out, progress)
    except BaseException:
        control.close()
        interrupts.restore()
        info.finish("failed")
        heartbeat.stop()
        raise
    status = "complete"
    print(f"rbench: run {run_id} → {run_dir}", file=out, flush=True)
    from rbench.live import run_metrics as rm
    if metrics_port is None and workload.metrics_port is not None:
        metrics_port = 0
    live: rm.RunMetrics | None = None
    try:
        if metrics_port is not None or pushgateway:
            live = rm.start(control.board, run_id, workload, plan.driver, metrics_port, access)
            if live.port is not None:
                shown = host if listening.metrics_bind in ("0.0.0.0", "::", "") else listening.metrics_bind
                info.set_metrics_endpoint(f"{'https' if live.tls else 'http'}://{shown}:{live.port}/metrics")
                print(f"rbench: run metrics (all tasks merged): {info.record.metrics_endpoint}", file=out, flush=True)
        for cluster in plan.clusters:
            if interrupts.interrupted:
                break
            info.set_status(cluster.name, "running")
            info.write()
            print(f"rbench: cluster {cluster.name}: {len(cluster.tasks)} task(s), {plan.producers} producer(s), "
                  f"{plan.consumers} consumer(s), driver {plan.driver}", file=out, flush=True)
            if progress or printer.csv is not None:
                printer.start(cluster.name)
            else:                          # nothing takes the board's per-second entries: keep none
                control.board.keep_seconds = False
            control.expect_tasks(cluster.name, len(cluster.tasks))
            watchers = _Watchers(workload, run_dir, run_id, cluster, control, routes, len(plan.steps), out)
            group = groups[cluster.name] = f"rbench-{run_id}-{cluster.name}"
            control.resolve_stage_attempts(cluster.name, spark.StageAttempts(session, group))
            results: list[TaskResult] = []
            timings.mark(f"{cluster.name}: stage submitted to Spark")
            try:
                # the executors' dicts (rbench.runtime.task) become typed here, where they arrive
                results = _task_results(cluster.name, spark.submit_barrier_stage(session, list(cluster.tasks), group=group))
                timings.mark(f"{cluster.name}: stage returned (every task's result in)")
            except RbenchError:
                info.set_status(cluster.name, "failed")
                reported = control.board.errors.get(cluster.name)
                if reported is not None:          # the task's own line, not Spark's "job cancelled"
                    raise unwrap_spark_error(RuntimeError(ERROR_MARK + reported)) from None
                raise
            finally:
                watchers.stop()
                for notice in control.board.notices.get(cluster.name, ()):      # the tasks' warnings, each once
                    print(f"rbench: warning: cluster {cluster.name}: {notice}", file=out or sys.stderr, flush=True)
                # every run of the stage, which one counts and why the others do not (docs/parquet.md)
                info.end_stage(cluster.name, attempts.describe(results, *control.board.cluster_attempts(cluster.name),
                                                               spark.stage_tasks(session, group)),
                               watchers.fault_records, watchers.pause, watchers.broker_metrics)
            info.set_task_results(cluster.name, results, sorted(
                v for (name, _), v in control.board.metrics_endpoints.items() if name == cluster.name))
            _mark_task_instants(timings, cluster.name, control.board.first_seen.get(cluster.name), results)
            t0 = _first_t0(results) or control.board.t0_ns.get(cluster.name)
            if t0:
                info.set_windows(cluster.name, t0, *_load_end(results), *_producer_span(results))
            cluster_status = "interrupted" if any(r.interrupted for r in results) else "complete"
            info.set_status(cluster.name, cluster_status)
            info.write()
            if cluster_status == "interrupted":
                status = "interrupted"
        if interrupts.interrupted:
            status = "interrupted"
    except BaseException:
        status = "interrupted" if interrupts.interrupted else "failed"
        for wc in workload.clusters:
            t0 = control.board.t0_ns.get(wc.name)
            if t0 and info.cluster(wc.name).t0_ns is None:      # the stage died: the load ended now, as far as we know
                info.set_windows(wc.name, t0, time.time_ns(), STOPPED_BY_INTERRUPT)
            if info.cluster(wc.name).status == "running":
                info.set_status(wc.name, status)
        raise
    finally:
        info.set_control_refused(control.refused_peers(), control.traffic)
        info.finish(status)           # first: nothing below may stop run.json from getting its final status
        heartbeat.stop()
        printer.stop()
        if live is not None:
            rm.finish(live, pushgateway, metrics_linger_s, out, idle=control.idle)
        control.close()
        interrupts.restore()
        _report_refused(control, info, out)
        timings.mark("run.json final, live view and control channel closed")
    return RunResult(run_dir, status, info.record)


def _report_refused(control: ControlServer, info: RunInfo, out: TextIO | None) -> None:
    """One warning line per peer the control channel turned away; run.json gets those that came after it was
    finished too (while the last scrape lingered)."""
    peers = control.refused_peers()
    if peers != info.record.control_refused:
        info.set_control_refused(peers)
        with contextlib.suppress(SinkError):
            info.write()
    for peer in peers:
        print(f"rbench: warning: {peer.line()}", file=out, flush=True)
