"""The typed run record: what run.json holds, as frozen dataclasses with ``to_json``/``from_json``.

run.json is the one statement of what a run was (docs/parquet.md): the coordinator writes it
(rbench.samples.runinfo.RunInfo builds a RunRecord) and the reduce, the summary, the orphan tidy,
the rate search and the history read it back, all through :func:`read_run_record`, so a renamed field
is a mypy error rather than a silent ``None`` in one of them, and each field's meaning is stated here once.

The JSON layout is today's: ``to_json`` writes the keys run.json always had (a field the run did not
fill is written as null or empty instead of left out), and ``from_json`` takes every key as optional
that an older writer could leave out, so older runs and the tests' synthetic runs read unchanged. ``schema_version`` says which layout a file has: a file without
it is version 1 (written before the field existed), the layout this rbench writes is
:data:`SCHEMA_VERSION`, and any other version is refused with one line (a later rbench may have moved
fields this one would misread). Keys this rbench does not know are kept in ``extra`` and written back,
so rewriting a run.json (the orphan tidy marks a run killed) never loses what a later rbench added.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rbench.errors import SinkError
from rbench.samples.attempts import StageAttempt
from rbench.samples.broker_facts import BrokerFacts
from rbench.samples.control_traffic import ControlTraffic
from rbench.samples.faults import FaultRecord
from rbench.samples.fields import Fields
from rbench.samples.reconnects import Reconnect, by_loss
from rbench.samples.refused import RefusedPeer
from rbench.samples.steps import StepRecord
from rbench.samples.tasks import TaskCounts, TaskResult
from rbench.samples.variant import BrokerVariant

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class PausePhase:
    """One phase of a consumer.pause run (steady, build-up, drain) and when it began."""

    phase: str
    start_ns: int
    backlog: int | None = None              # messages waiting when the phase began (None: steady)
    backlog_source: str | None = None       # "broker" or "client counts"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phase": self.phase, "start_ns": self.start_ns}
        if self.backlog_source is not None or self.backlog is not None:
            out.update(backlog=self.backlog, backlog_source=self.backlog_source)
        return out

    @classmethod
    def from_json(cls, data: object, where: str) -> PausePhase:
        f = Fields(data, where)
        return cls(phase=f.text("phase"), start_ns=f.req_int("start_ns"), backlog=f.opt_int("backlog"),
                   backlog_source=f.opt_text("backlog_source"))


@dataclass(frozen=True)
class PauseRecord:
    """A cluster's consumer pause (rbench.coordinator.pause): its settings and the phases it went through."""

    at_s: float
    until_backlog: int | None
    for_s: float | None
    drained_below: int
    copies_per_message: float               # copies of each message the queues hold (fan-out)
    phases: tuple[PausePhase, ...] = ()
    drained_seen_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"at_s": self.at_s, "until_backlog": self.until_backlog, "for_s": self.for_s,
                "drained_below": self.drained_below, "copies_per_message": self.copies_per_message,
                "phases": [p.to_json() for p in self.phases], "drained_seen_ns": self.drained_seen_ns}

    @classmethod
    def from_json(cls, data: object, where: str) -> PauseRecord:
        f = Fields(data, where)
        return cls(at_s=f.num("at_s", 0), until_backlog=f.opt_int("until_backlog"), for_s=f.opt_num("for_s"),
                   drained_below=f.req_int("drained_below", 0), copies_per_message=f.num("copies_per_message", 1),
                   phases=tuple(PausePhase.from_json(e, w) for w, e in f.entries("phases")),
                   drained_seen_ns=f.opt_int("drained_seen_ns"))


@dataclass(frozen=True)
class BrokerMetricsRecord:
    """What the broker sampler did beside a cluster's stage (rbench.coordinator.broker; docs/broker.md)."""

    interval_s: float
    sources: tuple[str, ...] = ()            # the sources that answered
    unreachable: Mapping[str, str] = field(default_factory=dict)    # source → why it could not be read
    proc_pid: int | None = None              # the broker's beam process, when sampled through /proc
    samples: int = 0
    errors: int = 0
    files: tuple[str, ...] = ()              # its part files, relative to the run directory
    queues: tuple[str, ...] = ()             # the workload's queues it measured

    def to_json(self) -> dict[str, Any]:
        return {"interval_s": self.interval_s, "sources": list(self.sources), "unreachable": dict(self.unreachable),
                "proc_pid": self.proc_pid, "samples": self.samples, "errors": self.errors, "files": list(self.files),
                "queues": list(self.queues)}

    @classmethod
    def from_json(cls, data: object, where: str) -> BrokerMetricsRecord:
        f = Fields(data, where)
        unreachable = f.mapping("unreachable")
        return cls(interval_s=f.num("interval_s", 0), sources=f.texts("sources"),
                   unreachable={str(k): str(v) for k, v in unreachable.items()}, proc_pid=f.opt_int("proc_pid"),
                   samples=f.req_int("samples", 0), errors=f.req_int("errors", 0), files=f.texts("files"),
                   queues=f.texts("queues"))


@dataclass(frozen=True)
class ClusterRecord:
    """One cluster of the run: its shape (for costs and the history), its status, t0 and step windows,
    what its tasks returned, the stage's attempts, the connections its tasks lost."""

    name: str
    nodes: int | None = None
    instance_type: str | None = None
    volume_type: str | None = None
    volume_gb: float | None = None
    volume_iops: float | None = None
    uris: tuple[str, ...] = ()               # masked
    status: str | None = None                # pending, running, complete, interrupted, failed, killed, not run
    tasks: int | None = None
    producers: int | None = None
    consumers: int | None = None
    t0_ns: int | None = None                 # the counted stage attempt's t0 (first message due)
    steps: tuple[StepRecord, ...] = ()
    task_results: tuple[TaskResult, ...] = ()      # what the (last run of the) stage returned
    reconnects: tuple[Reconnect, ...] = ()         # by loss time
    load_end_ns: int | None = None           # when the load ended (the last task to stop)
    stopped_by: str | None = None            # why (STOPPED_BY_*)
    pause: PauseRecord | None = None
    broker_metrics: BrokerMetricsRecord | None = None
    stage_attempts: tuple[StageAttempt, ...] = ()
    metrics_endpoints: tuple[str, ...] = ()
    broker: BrokerFacts | None = None        # what the run was measured on (rbench.samples.broker_facts)
    variant: BrokerVariant | None = None     # the broker variant asked for, its settings (rbench.samples.variant)
    extra: Mapping[str, Any] = field(default_factory=dict)

    JSON_KEYS: ClassVar[tuple[str, ...]] = (
        "name", "nodes", "instance_type", "volume_type", "volume_gb", "volume_iops", "uris", "status", "tasks", "producers",
        "consumers", "t0_ns", "steps", "task_results", "reconnects", "load_end_ns", "stopped_by", "pause", "broker_metrics",
        "stage_attempts", "metrics_endpoints", "broker", "variant")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": self.nodes, "instance_type": self.instance_type,
                "volume_type": self.volume_type, "volume_gb": self.volume_gb, "volume_iops": self.volume_iops,
                "uris": list(self.uris), "status": self.status, "tasks": self.tasks, "producers": self.producers,
                "consumers": self.consumers, "t0_ns": self.t0_ns, "steps": [s.to_json() for s in self.steps],
                "task_results": [r.to_json() for r in self.task_results],
                "reconnects": [r.to_json() for r in self.reconnects], "load_end_ns": self.load_end_ns,
                "stopped_by": self.stopped_by, "pause": None if self.pause is None else self.pause.to_json(),
                "broker_metrics": None if self.broker_metrics is None else self.broker_metrics.to_json(),
                "stage_attempts": [a.to_json() for a in self.stage_attempts],
                "metrics_endpoints": list(self.metrics_endpoints),
                "broker": None if self.broker is None else self.broker.to_json(),
                "variant": None if self.variant is None else self.variant.to_json(), **self.extra}

    @classmethod
    def from_json(cls, data: object, where: str) -> ClusterRecord:
        f = Fields(data, where)
        pause, broker, facts = f.obj("pause"), f.obj("broker_metrics"), f.obj("broker")
        return cls(name=f.text("name"), nodes=f.opt_int("nodes"), instance_type=f.opt_text("instance_type"),
                   volume_type=f.opt_text("volume_type"), volume_gb=f.opt_num("volume_gb"),
                   volume_iops=f.opt_num("volume_iops"), uris=f.texts("uris"), status=f.opt_text("status"),
                   tasks=f.opt_int("tasks"), producers=f.opt_int("producers"), consumers=f.opt_int("consumers"),
                   t0_ns=f.opt_int("t0_ns"), steps=tuple(StepRecord.from_json(e, w) for w, e in f.entries("steps")),
                   task_results=tuple(TaskResult.from_json(e, w) for w, e in f.entries("task_results")),
                   reconnects=tuple(Reconnect.from_json(e, w) for w, e in f.entries("reconnects")),
                   load_end_ns=f.opt_int("load_end_ns"), stopped_by=f.opt_text("stopped_by"),
                   pause=None if pause is None else PauseRecord.from_json(pause.data, pause.where),
                   broker_metrics=None if broker is None else BrokerMetricsRecord.from_json(broker.data, broker.where),
                   stage_attempts=tuple(StageAttempt.from_json(e, w) for w, e in f.entries("stage_attempts")),
                   metrics_endpoints=f.texts("metrics_endpoints"),
                   broker=None if facts is None else BrokerFacts.from_json(facts.data, facts.where),
                   variant=None if (v := f.obj("variant")) is None else BrokerVariant.from_json(v.data, v.where),
                   extra=f.extra(cls.JSON_KEYS))

    def counts(self) -> TaskCounts:
        """What the cluster's tasks counted, every message (warm-up included)."""
        return TaskCounts.total(r.counts for r in self.task_results)

    def counted_attempts(self) -> dict[int, int]:
        """task → the task attempt whose samples count: the ones the stage returned (its last run), sharing
        the cluster's t0 and step windows. Tasks without a result (a failed stage, an older run.json) are not listed."""
        return {r.task: r.attempt for r in self.task_results if r.task is not None and r.attempt is not None}

    def reconnects_by_loss(self) -> list[Reconnect]:
        return by_loss(self.reconnects)

    def skipped_disconnected(self) -> int:
        """Schedule slots not sent while a task was disconnected, over all steps."""
        return sum(s.skipped_disconnected for s in self.steps)

    def load_end(self) -> int | None:
        """When the cluster's load ended: recorded, else the end of its last step window."""
        if self.load_end_ns is not None:
            return self.load_end_ns
        return self.steps[-1].end_ns if self.steps else None


@dataclass(frozen=True)
class HostFacts:
    """The coordinator's host and the versions that ran (``rbench`` is what the history files as rbench_version)."""

    hostname: str | None = None
    cpus: int | None = None
    python: str | None = None
    platform: str | None = None
    rbench: str | None = None
    versions: Mapping[str, str] = field(default_factory=dict)   # library → version (pyspark, pyarrow, uvloop …)

    JSON_KEYS: ClassVar[tuple[str, ...]] = ("hostname", "cpus", "python", "platform", "rbench")

    def to_json(self) -> dict[str, Any]:
        return {"hostname": self.hostname, "cpus": self.cpus, "python": self.python, "platform": self.platform,
                "rbench": self.rbench, **self.versions}

    @classmethod
    def from_json(cls, data: object, where: str) -> HostFacts:
        f = Fields(data, where)
        return cls(hostname=f.opt_text("hostname"), cpus=f.opt_int("cpus"), python=f.opt_text("python"),
                   platform=f.opt_text("platform"), rbench=f.opt_text("rbench"),
                   versions={k: str(v) for k, v in f.extra(cls.JSON_KEYS).items()})


@dataclass(frozen=True)
class CoordinatorIdentity:
    """Which process coordinates the run, so the next run can tell it died (rbench.coordinator.orphans)."""

    hostname: str | None
    pid: int | None
    alive_file: str | None
    heartbeat_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {"hostname": self.hostname, "pid": self.pid, "alive_file": self.alive_file,
                "heartbeat_s": self.heartbeat_s}

    @classmethod
    def from_json(cls, data: object, where: str) -> CoordinatorIdentity:
        f = Fields(data, where)
        return cls(hostname=f.opt_text("hostname"), pid=f.opt_int("pid"), alive_file=f.opt_text("alive_file"),
                   heartbeat_s=f.opt_num("heartbeat_s"))


@dataclass(frozen=True)
class KilledNote:
    """How a run whose coordinator died was found (status ``killed``)."""

    found_at: str
    why: str
    last_alive_at: str

    def to_json(self) -> dict[str, Any]:
        return {"found_at": self.found_at, "why": self.why, "last_alive_at": self.last_alive_at}

    @classmethod
    def from_json(cls, data: object, where: str) -> KilledNote:
        f = Fields(data, where)
        return cls(found_at=f.text("found_at"), why=f.text("why"), last_alive_at=f.text("last_alive_at"))


@dataclass(frozen=True)
class RunRecord:
    """One run.json."""

    run_id: str | None = None
    status: str | None = None                # running, complete, interrupted, failed, killed
    workload_name: str | None = None
    workload: Mapping[str, Any] = field(default_factory=dict)    # the validated workload as JSON, URIs masked
    workload_hash: str | None = None
    driver: str | None = None
    started_at: str | None = None            # ISO 8601, UTC
    ended_at: str | None = None
    warmup_s: float = 0.0
    message_count: int | None = None
    clock: str | None = None                 # which clocks the latencies mix (one line for people)
    latency: str | None = None               # how the latencies are measured (one line for people)
    host: HostFacts | None = None
    clusters: tuple[ClusterRecord, ...] = ()
    faults: tuple[FaultRecord, ...] = ()     # every executed fault, any cluster, in the order they started
    stage_attempts_allowed: int | None = None
    routes: Mapping[int, tuple[str, ...]] | None = None       # producer → the queues each message is routed to
    queues_created: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # cluster → queues the run created
    coordinator: CoordinatorIdentity | None = None
    metrics_endpoint: str | None = None
    killed: KilledNote | None = None
    control_refused: tuple[RefusedPeer, ...] = ()   # peers the control channel turned away (samples.refused)
    control_traffic: ControlTraffic | None = None   # lines, bytes, connections it read (samples.control_traffic)
    schema_version: int = SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    JSON_KEYS: ClassVar[tuple[str, ...]] = (
        "schema_version", "run_id", "status", "workload_name", "workload", "workload_hash", "driver", "started_at", "ended_at",
        "warmup_s", "message_count", "clock", "latency", "host", "clusters", "faults", "stage_attempts_allowed", "routes",
        "queues_created", "coordinator", "metrics_endpoint", "killed", "control_refused",
        "control_traffic")

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": self.schema_version, "run_id": self.run_id, "status": self.status,
                "workload_name": self.workload_name, "workload": dict(self.workload),
                "workload_hash": self.workload_hash, "driver": self.driver, "started_at": self.started_at,
                "ended_at": self.ended_at, "warmup_s": self.warmup_s, "message_count": self.message_count,
                "clock": self.clock, "latency": self.latency,
                "host": None if self.host is None else self.host.to_json(),
                "clusters": [c.to_json() for c in self.clusters], "faults": [f.to_json() for f in self.faults],
                "stage_attempts_allowed": self.stage_attempts_allowed,
                "routes": None if self.routes is None else {str(p): list(qs) for p, qs in self.routes.items()},
                "queues_created": {c: list(qs) for c, qs in self.queues_created.items()},
                "coordinator": None if self.coordinator is None else self.coordinator.to_json(),
                "metrics_endpoint": self.metrics_endpoint,
                "killed": None if self.killed is None else self.killed.to_json(),
                "control_refused": [r.to_json() for r in self.control_refused],
                "control_traffic": None if self.control_traffic is None else self.control_traffic.to_json(),
                **self.extra}

    @classmethod
    def from_json(cls, data: object) -> RunRecord:
        """Parse run.json's object; SinkError (one line) for an unknown schema version or a malformed field."""
        f = Fields(data, "")
        version = schema_version(f)
        faults = []
        for where, entry in f.entries("faults"):
            try:
                faults.append(FaultRecord.from_json(entry, where))
            except ValueError as exc:
                raise SinkError(f"run.json: {exc}") from None
        host, coordinator, killed = f.obj("host"), f.obj("coordinator"), f.obj("killed")
        traffic = f.obj("control_traffic")
        return cls(run_id=f.opt_text("run_id"), status=f.opt_text("status"), workload_name=f.opt_text("workload_name"),
                   workload=f.mapping("workload"), workload_hash=f.opt_text("workload_hash"), driver=f.opt_text("driver"),
                   started_at=f.opt_text("started_at"), ended_at=f.opt_text("ended_at"),
                   warmup_s=f.opt_num("warmup_s") or 0.0, message_count=f.opt_int("message_count"),
                   clock=f.opt_text("clock"), latency=f.opt_text("latency"),
                   host=None if host is None else HostFacts.from_json(host.data, host.where),
                   clusters=tuple(ClusterRecord.from_json(e, w) for w, e in f.entries("clusters")),
                   faults=tuple(faults), stage_attempts_allowed=f.opt_int("stage_attempts_allowed"),
                   routes=_queue_lists(f, "routes", int), queues_created=_queue_lists(f, "queues_created", str) or {},
                   coordinator=None if coordinator is None else CoordinatorIdentity.from_json(coordinator.data,
                                                                                              coordinator.where),
                   metrics_endpoint=f.opt_text("metrics_endpoint"),
                   killed=None if killed is None else KilledNote.from_json(killed.data, killed.where),
                   control_refused=tuple(RefusedPeer.from_json(e, w) for w, e in f.entries("control_refused")),
                   control_traffic=None if traffic is None else ControlTraffic.from_json(traffic.data, traffic.where),
                   schema_version=version, extra=f.extra(cls.JSON_KEYS))

    def cluster(self, name: str) -> ClusterRecord | None:
        return next((c for c in self.clusters if c.name == name), None)

    def faults_of(self, cluster: str | None = None) -> list[FaultRecord]:
        """The run's faults in the order they were executed; only ``cluster``'s when given."""
        return [f for f in self.faults if cluster is None or f.cluster == cluster]

    def counted_attempts(self) -> dict[tuple[str, int], int]:
        """(cluster, task) → the task attempt whose samples count (rbench.samples.layout.committed_parts)."""
        return {(c.name, task): attempt for c in self.clusters for task, attempt in c.counted_attempts().items()}

    def messages_moved(self) -> int:
        """Messages the tasks published and consumed in all: 0 when the run ended before any load was sent."""
        return sum(c.counts().published + c.counts().consumed for c in self.clusters)

    def broker_version(self, cluster: ClusterRecord) -> str | None:
        """The broker version a run.json records for ``cluster``: its ``broker`` facts, else (older or hand-made
        run.json) a version key among the keys this rbench does not write, on the cluster or on the run."""
        if cluster.broker is not None and cluster.broker.version:
            return cluster.broker.version
        for source in (cluster.extra, self.extra.get("broker") or {}):
            for key in ("broker_version", "rabbitmq_version", "version"):
                if isinstance(source, Mapping) and source.get(key):
                    return str(source[key])
        return str(self.extra["broker_version"]) if self.extra.get("broker_version") else None


def schema_version(f: Fields, source: str = "run.json") -> int:
    """The file's layout version (1 when it has none); SinkError naming ``source`` when this rbench cannot read it."""
    version = f.req_int("schema_version", 1)
    if version != SCHEMA_VERSION:
        raise SinkError(f"{source}: schema_version {version} is not one this rbench reads ({SCHEMA_VERSION}): "
                        f"written by another rbench version; read it with that version")
    return version


def _queue_lists(f: Fields, key: str, kind: type[Any]) -> dict[Any, tuple[str, ...]] | None:
    """An object of queue-name lists (``routes``: producer → queues; ``queues_created``: cluster → queues)."""
    value = f.obj(key)
    if value is None:
        return None
    out = {}
    for name in value.data:
        try:
            out[kind(name)] = value.texts(name)
        except ValueError:
            raise SinkError(f"run.json: {value.at(name)}: expected a {kind.__name__} key") from None
    return out


def read_run_record(path: Path | str) -> RunRecord:
    """A run directory's run.json (or the file itself); SinkError, one line, when it is missing, is not JSON,
    has no clusters list, is of an unknown schema version or has a malformed field."""
    path = Path(path)
    meta = path / "run.json" if path.is_dir() else path
    try:
        data = json.loads(meta.read_text())
    except FileNotFoundError:
        raise SinkError(f"{meta.parent}: no run.json (not a run directory, or the run never started)") from None
    except (OSError, ValueError) as exc:
        raise SinkError(f"{meta}: unreadable run.json ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("clusters"), list):
        raise SinkError(f"{meta}: run.json has no 'clusters' list")
    schema_version(Fields(data, ""), str(meta))        # which file, when several runs are read together
    return RunRecord.from_json(data)


def write_run_record(path: Path, record: RunRecord) -> None:
    """Replace run.json in one step (a reader never sees half a file)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record.to_json(), indent=2, default=str))
        os.replace(tmp, path)
    except OSError as exc:
        raise SinkError(f"cannot write {path}: {exc.strerror}") from None


def read_faults(run: RunRecord | Mapping[str, Any] | Path | str, cluster: str | None = None) -> list[FaultRecord]:
    """The fault records of a run (its record, its directory, its run.json, or run.json already loaded), in the
    order they were executed; only ``cluster``'s when given. Runs from before faults existed have none."""
    if isinstance(run, (Path, str)):
        path = Path(run)
        try:
            data = json.loads((path / "run.json" if path.is_dir() else path).read_text())
        except OSError as exc:
            raise SinkError(f"cannot read {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise SinkError(f"{path}: {exc}") from None
        run = data if isinstance(data, Mapping) else {}
    record = run if isinstance(run, RunRecord) else RunRecord.from_json(run)
    return record.faults_of(cluster)


def read_reconnects(run: RunRecord | Mapping[str, Any], cluster: str) -> list[Reconnect]:
    """Every connection the cluster's tasks lost during the run, by ``t_lost_ns``; [] when none was logged."""
    record = run if isinstance(run, RunRecord) else RunRecord.from_json(run)
    c = record.cluster(cluster)
    return [] if c is None else c.reconnects_by_loss()
