"""run.json: what was run, where, when, on what, and whether it finished: the writer.

Written when the run starts (status running) and rewritten at the end, so an
interrupted or crashed run still says what it was. The reduce job trusts it for
step windows and the warm-up; see docs/parquet.md. The shape is the typed record of
rbench.samples.record; every reader reads it through rbench.samples.record.read_run_record.
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import secrets
import socket
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rbench import __version__
from rbench.config.types import RunPlan
from rbench.config.uri import mask_uri
from rbench.errors import SinkError
from rbench.samples.attempts import StageAttempt
from rbench.samples.broker_facts import BrokerFacts
from rbench.samples.control_traffic import ControlTraffic
from rbench.samples.faults import FaultRecord
from rbench.samples.reconnects import by_loss
from rbench.samples.record import (
    BrokerMetricsRecord,
    ClusterRecord,
    CoordinatorIdentity,
    HostFacts,
    PauseRecord,
    RunRecord,
    write_run_record,
)
from rbench.samples.refused import RefusedPeer
from rbench.samples.steps import StepRecord
from rbench.samples.tasks import TaskResult
from rbench.samples.windows import STOPPED_BY_COUNT, measure

# Why a cluster's load ended. Unless the schedule ran out, each step's window is cut where the load
# stopped, so a rate is always messages ÷ the time the load really ran (docs/parquet.md, run.json steps).
STOPPED_BY_SCHEDULE, STOPPED_BY_INTERRUPT = "schedule", "interrupt"
STEP_COMPLETE, STEP_CUT, STEP_NOT_RUN = "complete", "cut", "not run"


def new_run_id(workload_name: str, now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{workload_name}-{secrets.token_hex(2)}"


def _iso(t: dt.datetime | None = None) -> str:
    return (t or dt.datetime.now(dt.timezone.utc)).isoformat(timespec="seconds")


def host_facts() -> HostFacts:
    versions = {}
    for module in ("pyspark", "pyarrow", "aio_pika", "uvloop", "rstream"):
        mod = sys.modules.get(module)
        if mod is not None:
            versions[module] = str(getattr(mod, "__version__", "?"))
    return HostFacts(hostname=socket.gethostname(), cpus=os.cpu_count(), python=platform.python_version(),
                     platform=platform.platform(), rbench=__version__, versions=versions)


class RunInfo:
    """The run.json of one run directory, written while the run runs.

    RunInfo is the one writer and holds the run's record (``record``, a frozen RunRecord); every change
    builds a new record with dataclasses.replace instead of editing a dict in place. Why: the signal
    handler (a second Ctrl-C) writes run.json at any point of the stage loop; an immutable record is
    always whole, so what it writes is the state before or after a change, never half of one, and the
    record the coordinator hands back (RunResult.record) cannot be changed under a reader's feet."""

    def __init__(self, run_dir: Path, plan: RunPlan, workload: dict[str, Any], workload_hash: str, *,
                 stage_attempts_allowed: int | None = None, routes: Mapping[int, list[str]] | None = None,
                 queues_created: Mapping[str, list[str]] | None = None,
                 coordinator: CoordinatorIdentity | None = None, brokers: Mapping[str, BrokerFacts] | None = None) -> None:
        """``workload`` is the validated workload as JSON (its URIs are masked here); ``plan`` says the rest.
        ``routes``: producer → its messages' queues (fan-out); ``queues_created``: per cluster, what a later
        run deletes should this coordinator die (rbench.coordinator.orphans); ``brokers``: per cluster, the broker
        read before the run (run.json ``clusters[].broker``)."""
        self.path = run_dir / "run.json"
        specs = {c["name"]: c for c in workload.get("clusters", [])}
        # the workload as written may contain credentials: mask them in the copy we keep
        for c in workload.get("clusters", []):
            c["uris"] = [mask_uri(u) for u in c.get("uris", [])]
            c["stream_uris"] = [mask_uri(u) for u in c.get("stream_uris", [])]
        clusters = []
        for cp in plan.clusters:
            t = cp.target
            clusters.append(ClusterRecord(
                name=t.name, nodes=t.nodes, instance_type=t.instance_type, volume_type=t.volume_type,
                volume_gb=t.volume_gb, volume_iops=specs.get(t.name, {}).get("volume_iops"),
                uris=tuple(mask_uri(u) for u in t.uris), status="pending", tasks=len(cp.tasks),
                producers=plan.producers, consumers=plan.consumers, broker=(brokers or {}).get(t.name),
                variant=t.variant,
                steps=tuple(StepRecord(step=s.index, rate_per_producer=s.rate, target_rate=plan.target_rate(s),
                                       offset_s=s.offset_s, duration_s=s.duration_s,
                                       churn_per_task=None if s.churn is None else s.churn.rate,
                                       churn_does=None if s.churn is None else s.churn.describe())
                           for s in plan.steps)))
        self.record = RunRecord(
            run_id=plan.run_id, status="running", workload_name=plan.workload_name, workload=workload,
            workload_hash=workload_hash, driver=plan.driver, started_at=_iso(), warmup_s=plan.warmup_s,
            message_count=plan.message_count,
            clock=("producers and consumers of a queue share a task (one clock)" if plan.colocate
                   else "producers and consumers may run in different tasks: end-to-end latency mixes clocks"),
            latency="end-to-end = t_received - t_intended (open-loop schedule, corrected for coordinated omission); "
                    "also t_received - t_sent; confirm = t_confirmed - t_sent; all time.time_ns()",
            host=host_facts(), clusters=tuple(clusters), stage_attempts_allowed=stage_attempts_allowed,
            routes=None if routes is None else {p: tuple(qs) for p, qs in routes.items()},
            queues_created={c: tuple(qs) for c, qs in (queues_created or {}).items()}, coordinator=coordinator)

    def cluster(self, name: str) -> ClusterRecord:
        return next(c for c in self.record.clusters if c.name == name)

    def _replace_cluster(self, name: str, cluster: ClusterRecord) -> None:
        self.record = replace(self.record, clusters=tuple(cluster if c.name == name else c for c in self.record.clusters))

    def set_status(self, name: str, status: str) -> None:
        """The cluster's status: running, complete, interrupted, failed (see finish for the rest)."""
        self._replace_cluster(name, replace(self.cluster(name), status=status))

    def set_metrics_endpoint(self, url: str) -> None:
        self.record = replace(self.record, metrics_endpoint=url)

    def set_control_refused(self, peers: tuple[RefusedPeer, ...], traffic: ControlTraffic | None = None) -> None:
        """The peers the control channel turned away so far, and what it read (written with the next write or
        finish)."""
        self.record = replace(self.record, control_refused=peers,
                              control_traffic=self.record.control_traffic if traffic is None else traffic)

    def end_stage(self, name: str, stage_attempts: list[StageAttempt], faults: list[FaultRecord],
                  pause: PauseRecord | None, broker_metrics: BrokerMetricsRecord | None) -> None:
        """What the coordinator knows when a cluster's stage ended, whether it succeeded or not: every run of the
        stage, the faults executed beside it, the consumer pause and the broker sampler's summary (None: not run)."""
        c = self.cluster(name)
        self._replace_cluster(name, replace(c, stage_attempts=tuple(stage_attempts),
                                            pause=c.pause if pause is None else pause,
                                            broker_metrics=c.broker_metrics if broker_metrics is None else broker_metrics))
        self.record = replace(self.record, faults=self.record.faults + tuple(faults))

    def set_task_results(self, name: str, results: list[TaskResult], metrics_endpoints: list[str]) -> None:
        """What the stage returned, and the cluster's lost connections its tasks rode through (docs/parquet.md):
        ``reconnects`` (every task's records, by loss time) and each step's ``skipped_disconnected`` (schedule
        slots not sent while a task was disconnected, summed over the tasks)."""
        c = self.cluster(name)
        steps = tuple(replace(s, skipped_disconnected=sum(r.skipped_disconnected[s.step] for r in results
                                                          if len(r.skipped_disconnected) > s.step))
                      for s in c.steps)
        self._replace_cluster(name, replace(c, task_results=tuple(results), steps=steps,
                                            reconnects=tuple(by_loss(x for r in results for x in r.reconnects)),
                                            metrics_endpoints=tuple(metrics_endpoints)))

    def set_windows(self, name: str, t0_ns: int, load_end_ns: int | None = None,
                    stopped_by: str = STOPPED_BY_SCHEDULE, producers_due_ns: int | None = None,
                    producers_first_stop_ns: int | None = None) -> None:
        """Each step's real window: planned from t0, cut at ``load_end_ns`` unless the schedule ran out; and its
        measurement window (rbench.samples.windows: warm-up, the producers' start and a count's end excluded).

        A step that started before the load stopped ends there ("cut", with the reason); a step
        that would have started after it never ran ("not run": no window, no figures)."""
        c = self.cluster(name)
        cut_at = None if stopped_by == STOPPED_BY_SCHEDULE or load_end_ns is None else load_end_ns
        steps = []
        for s in c.steps:
            start = t0_ns + int((s.offset_s or 0.0) * 1e9)
            planned_end = start + int(s.duration_s * 1e9)
            s = replace(s, planned_start_ns=start, planned_end_ns=planned_end)
            if cut_at is not None and start >= cut_at:
                s = replace(s, start_ns=None, end_ns=None, status=STEP_NOT_RUN, cut_by=stopped_by)
            elif cut_at is not None and cut_at < planned_end:
                s = replace(s, start_ns=start, end_ns=cut_at, status=STEP_CUT, cut_by=stopped_by)
            else:
                s = replace(s, start_ns=start, end_ns=planned_end, status=STEP_COMPLETE, cut_by=None)
            steps.append(measure(s, self.record.warmup_s, producers_due_ns, producers_first_stop_ns,
                                 stopped_by == STOPPED_BY_COUNT))
        self._replace_cluster(name, replace(c, t0_ns=t0_ns, load_end_ns=load_end_ns, stopped_by=stopped_by,
                                            steps=tuple(steps)))

    def mark_unfinished(self, status: str) -> None:
        """Record a final status now, from a signal handler, in case the process ends before finish()."""
        self.record = replace(end_clusters(self.record, status), status=status, ended_at=_iso())
        try:
            self.write()
        except SinkError:
            pass

    def finish(self, status: str) -> None:
        clusters = tuple(replace(c, status="not run") if c.status == "pending" and status != "complete" else c
                         for c in self.record.clusters)
        self.record = replace(self.record, clusters=clusters, status=status, ended_at=_iso())
        self.write()

    def write(self) -> None:
        write_run_record(self.path, self.record)


def end_clusters(record: RunRecord, status: str) -> RunRecord:
    """A run that ended without finishing: its running clusters get ``status``, its pending ones "not run"."""
    ended = {"running": status, "pending": "not run"}
    return replace(record, clusters=tuple(replace(c, status=ended[c.status]) if c.status in ended else c
                                          for c in record.clusters))
