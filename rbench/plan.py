"""Split a workload over Spark tasks, deterministically.

By default each queue, with all of its producers and consumers, lives in exactly one
task, so end-to-end latency is measured on one clock. Producer i and consumer j go to
queue i mod Q and j mod Q, as PerfTest spreads them over a queue pattern.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from rbench.config.model import Workload
from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, QueueDecl, Topology
from rbench.errors import ConfigError


@dataclass(frozen=True)
class StepWindow:
    """A rate step relative to the run's t0: [offset_s, offset_s + duration_s)."""

    index: int
    rate: float | None          # per producer; None = unlimited
    offset_s: float
    duration_s: float


@dataclass(frozen=True)
class TaskPlan:
    """Everything one executor task needs; picklable, no pydantic."""

    run_id: str
    cluster: ClusterTarget
    task: int
    n_tasks: int
    driver: str
    topology: Topology
    publishers: tuple[PublisherSpec, ...]
    consumers: tuple[ConsumerSpec, ...]
    steps: tuple[StepWindow, ...]
    size: int
    out_dir: str
    message_count: int | None = None           # per producer
    consumer_message_count: int | None = None  # per consumer
    random_start_delay_s: float = 0.0
    confirm_timeout_s: float | None = 30.0
    warmup_s: float = 0.0
    drain_timeout_s: float = 10.0
    control: tuple[str, int] | None = None      # driver's progress/control endpoint
    metrics_port: int | None = None
    seed: int = 0
    extra: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def end_offset_s(self) -> float:
        last = self.steps[-1]
        return last.offset_s + last.duration_s


def cluster_target(workload: Workload, name: str) -> ClusterTarget:
    for c in workload.clusters:
        if c.name == name:
            return ClusterTarget(name=c.name, uris=tuple(c.uris), stream_uris=tuple(c.stream_uris), nodes=c.nodes,
                                 instance_type=c.instance_type, volume_type=c.volume_type, volume_gb=c.volume_gb)
    raise ConfigError(f"clusters: no cluster named {name!r}")


def step_windows(workload: Workload) -> tuple[StepWindow, ...]:
    windows, offset = [], 0.0
    for i, step in enumerate(workload.steps()):
        windows.append(StepWindow(index=i, rate=step.rate, offset_s=offset, duration_s=step.duration))
        offset += step.duration
    return tuple(windows)


def default_task_count(workload: Workload, slots: int) -> int:
    if workload.tasks != "auto":
        return int(workload.tasks)
    queues = len(workload.queues.names(workload.name))
    units = queues if workload.colocate else max(workload.producers, workload.consumers, 1)
    return max(1, min(units, slots))


def plan(workload: Workload, cluster: str, n_tasks: int, run_id: str, out_dir: str,
         control: tuple[str, int] | None = None) -> list[TaskPlan]:
    """The TaskPlans of one cluster's stage, index i for Spark partition i."""
    if n_tasks < 1:
        raise ConfigError(f"tasks: expected at least 1, got {n_tasks}")
    target = cluster_target(workload, cluster)
    queue_names = workload.queues.names(workload.name)
    if workload.colocate and n_tasks > len(queue_names):
        raise ConfigError(f"tasks: {n_tasks} tasks but only {len(queue_names)} queue(s); with colocate each queue "
                          f"lives in one task, so use at most {len(queue_names)} tasks or set colocate: false")
    q = workload.queues
    args = tuple(sorted(q.broker_arguments().items()))
    decls = [QueueDecl(name=n, durable=q.durable, auto_delete=q.auto_delete, exclusive=q.exclusive, arguments=args)
             for n in queue_names]
    queue_task = {n: i % n_tasks for i, n in enumerate(queue_names)}
    ex = workload.exchange
    is_stream = q.type == "stream"
    exchange = "" if is_stream else ex.name

    def routing_key(queue: str) -> str:
        return queue if exchange == "" or workload.routing_key is None else workload.routing_key

    pubs: list[list[PublisherSpec]] = [[] for _ in range(n_tasks)]
    for i in range(workload.producers):
        queue = queue_names[i % len(queue_names)]
        task = queue_task[queue] if workload.colocate else i % n_tasks
        p = workload.publisher
        pubs[task].append(PublisherSpec(
            producer_id=i, queue=queue, exchange=exchange, routing_key=routing_key(queue), confirm=p.confirm,
            confirm_window=p.confirm_window, mandatory=p.mandatory, persistent=p.persistent,
            message_format=p.message_format))
    cons: list[list[ConsumerSpec]] = [[] for _ in range(n_tasks)]
    for j in range(workload.consumers):
        queue = queue_names[j % len(queue_names)]
        task = queue_task[queue] if workload.colocate else j % n_tasks
        c = workload.consumer
        cons[task].append(ConsumerSpec(
            consumer_id=j, queue=queue, prefetch=c.prefetch, auto_ack=c.auto_ack, multi_ack_every=c.multi_ack_every,
            processing_delay_us=int(round(c.processing_delay * 1e6)), offset=c.offset, single_active=c.single_active,
            message_format=workload.publisher.message_format))

    steps = step_windows(workload)
    plans = []
    for t in range(n_tasks):
        own = tuple(d for d in decls if queue_task[d.name] == t) if not q.predeclared else ()
        bindings = tuple((d.name, routing_key(d.name)) for d in own) if exchange else ()
        topology = Topology(exchange=exchange if not is_stream else "", exchange_type=ex.type,
                            exchange_durable=ex.durable, queues=own, bindings=bindings)
        plans.append(TaskPlan(
            run_id=run_id, cluster=target, task=t, n_tasks=n_tasks, driver=workload.resolved_driver(),
            topology=topology, publishers=tuple(pubs[t]), consumers=tuple(cons[t]), steps=steps, size=workload.size,
            out_dir=out_dir, message_count=workload.publisher.message_count,
            consumer_message_count=workload.consumer.message_count,
            random_start_delay_s=workload.publisher.random_start_delay,
            confirm_timeout_s=workload.publisher.confirm_timeout if workload.publisher.confirm else None,
            warmup_s=workload.warmup, drain_timeout_s=workload.drain_timeout, control=control,
            metrics_port=workload.metrics_port, seed=zlib.crc32(f"{run_id}/{cluster}/{t}".encode())))
    return plans


def describe(plans: list[TaskPlan]) -> str:
    """A table of the split, as `rbench plan` prints it."""
    lines = [f"{'task':>4}  {'queues':<40} {'producers':>9} {'consumers':>9}"]
    for p in plans:
        queues = sorted({s.queue for s in p.publishers} | {s.queue for s in p.consumers} | {d.name for d in p.topology.queues})
        shown = ", ".join(queues[:4]) + (f" … (+{len(queues) - 4})" if len(queues) > 4 else "")
        lines.append(f"{p.task:>4}  {shown:<40} {len(p.publishers):>9} {len(p.consumers):>9}")
    return "\n".join(lines)
