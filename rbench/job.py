"""The Spark driver side of `rbench run`: one barrier stage per cluster.

Clusters run one after another (they would otherwise compete for the same client
CPUs and skew each other). Before any Spark work, every cluster is probed with the
workload's driver so a broker that is down or refuses credentials fails in seconds
with one line, not after a Spark stage and a Java traceback.
"""
from __future__ import annotations

import asyncio
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rbench.config.model import Workload
from rbench.control import ControlServer
from rbench.drivers.base import load_driver
from rbench.errors import BrokerError, ConfigError, RbenchError
from rbench.plan import cluster_target, default_task_count, plan
from rbench.progress import ProgressPrinter
from rbench.runinfo import RunInfo, new_run_id
from rbench.runtime.task import ERROR_MARK

PROBE_TIMEOUT_S = 10.0


@dataclass
class RunResult:
    run_dir: Path
    status: str
    info: dict[str, Any]


async def _probe(workload: Workload, cluster: str) -> None:
    driver = load_driver(workload.resolved_driver())
    try:
        await asyncio.wait_for(driver.open(cluster_target(workload, cluster)), PROBE_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise BrokerError(f"cluster {cluster}: no answer from the broker within {PROBE_TIMEOUT_S:.0f} s") from None
    finally:
        try:
            await asyncio.wait_for(driver.aclose(), 5)
        except Exception:
            pass


def probe_clusters(workload: Workload) -> None:
    """Connect once to every cluster; the first that fails raises, named."""
    for c in workload.clusters:
        try:
            asyncio.run(_probe(workload, c.name))
        except BrokerError as exc:
            message = str(exc) if str(exc).startswith("cluster ") else f"cluster {c.name}: {exc}"
            raise type(exc)(message) from None


def spark_error(exc: BaseException) -> RbenchError:
    """Pull our one-line message (or Spark's own first line) out of a Py4J/Spark error."""
    text = str(exc)
    if ERROR_MARK in text:
        line = text.split(ERROR_MARK, 1)[1].splitlines()[0]
        return BrokerError(line)
    if "barrier" in text.lower() and "slots" in text.lower():
        return ConfigError("tasks: the Spark cluster has fewer free task slots than the barrier stage needs")
    first = next((ln for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return RbenchError(f"Spark job failed: {first[:300]}")


class _Interrupts:
    """First Ctrl-C/SIGTERM: ask tasks to stop and flush; second: cancel the Spark job."""

    def __init__(self, control: ControlServer, session: Any, out: TextIO) -> None:
        self.control, self.session, self.out = control, session, out
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
            print("rbench: aborting the Spark job", file=self.out, flush=True)
            self.session.sparkContext.cancelAllJobs()

    @property
    def interrupted(self) -> bool:
        return self.count > 0


def run_workload(workload: Workload, out_root: str | Path, session: Any, tasks: int | None = None,
                 out: TextIO = sys.stdout, progress: bool = True, control_host: str | None = None) -> RunResult:
    """Run every cluster of `workload` on `session`; samples land in out_root/<run_id>/.

    Call probe_clusters(workload) first for a fast, clear error when a broker is down.
    """
    from rbench import sparkglue

    run_id = new_run_id(workload.name)
    run_dir = Path(out_root).resolve() / run_id
    driver_name = workload.resolved_driver()
    info = RunInfo(run_dir, workload, run_id, driver_name)
    info.write()
    host = control_host or session.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")
    control = ControlServer(host=host).start()
    interrupts = _Interrupts(control, session, out)
    interrupts.install()
    steps = [(s.rate, s.duration) for s in workload.steps()]
    printer = ProgressPrinter(control.board, steps, workload.producers, out=out)
    slots = sparkglue.total_slots(session)
    status = "complete"
    print(f"rbench: run {run_id} → {run_dir}", file=out, flush=True)
    try:
        for cluster in workload.clusters:
            if interrupts.interrupted:
                break
            n = tasks or default_task_count(workload, slots)
            if n > slots:
                raise ConfigError(f"tasks: the run needs {n} Spark task slots at once (barrier stage) "
                                  f"but the cluster offers {slots}; lower tasks or add executors")
            plans = plan(workload, cluster.name, n, run_id, str(run_dir.parent), control=control.address)
            c = info.cluster(cluster.name)
            c["tasks"], c["status"] = n, "running"
            info.write()
            print(f"rbench: cluster {cluster.name}: {n} task(s), {workload.producers} producer(s), "
                  f"{workload.consumers} consumer(s), driver {driver_name}", file=out, flush=True)
            if progress:
                printer.start(cluster.name)
            try:
                results = sparkglue.submit_barrier_stage(session, plans)
            except RbenchError:
                raise                     # ours already: keep its one line
            except Exception as exc:  # Py4J / Spark errors carry Java tracebacks: keep one line
                c["status"] = "failed"
                raise spark_error(exc) from None
            c["task_results"] = results
            c["metrics_endpoints"] = sorted(v for (name, _), v in control.board.metrics_endpoints.items() if name == cluster.name)
            t0 = min((r["t0_ns"] for r in results if r.get("t0_ns")), default=control.board.t0_ns.get(cluster.name))
            if t0:
                info.set_t0(cluster.name, t0)
            c["status"] = "interrupted" if any(r.get("interrupted") for r in results) else "complete"
            info.write()
            if c["status"] == "interrupted":
                status = "interrupted"
        if interrupts.interrupted:
            status = "interrupted"
    except BaseException:
        status = "interrupted" if interrupts.interrupted else "failed"
        for cluster in workload.clusters:
            t0 = control.board.t0_ns.get(cluster.name)
            c = info.cluster(cluster.name)
            if t0 and c["t0_ns"] is None:
                info.set_t0(cluster.name, t0)
            if c["status"] == "running":
                c["status"] = status
        raise
    finally:
        printer.stop()
        interrupts.restore()
        control.close()
        info.finish(status)
    return RunResult(run_dir, status, info.data)
