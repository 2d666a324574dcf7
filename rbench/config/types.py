"""Plain frozen dataclasses: the plan of a run, handed from the coordinator to executors.

pydantic stays at the YAML boundary (rbench.config.model); executors receive these
picklable, dependency-free values so a task never re-validates or imports pydantic
(tests/unit/test_imports.py holds the task runtime to that).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class ClusterTarget:
    """One broker (or cluster of nodes) under test, as the cost model sees it."""

    name: str
    uris: tuple[str, ...]                      # amqp:// or amqps://, tried in order (fail-over)
    stream_uris: tuple[str, ...] = ()          # rabbitmq-stream://; derived from uris when empty
    amqp10_uris: tuple[str, ...] = ()          # amqp1.0 endpoints (same port as 0.9.1 on RabbitMQ 3.x)
    nodes: int = 1
    instance_type: str | None = None
    volume_type: str | None = None
    volume_gb: int = 0


@dataclass(frozen=True)
class QueueDecl:
    """A queue (or stream) to declare; ``arguments`` go to the broker verbatim."""

    name: str
    durable: bool = True
    auto_delete: bool = False
    exclusive: bool = False
    arguments: tuple[tuple[str, Any], ...] = ()

    @property
    def queue_type(self) -> str:
        return str(dict(self.arguments).get("x-queue-type", "classic"))

    @property
    def is_stream(self) -> bool:
        return self.queue_type == "stream"


@dataclass(frozen=True)
class Topology:
    """Exchange, queues and bindings one task needs before it publishes."""

    exchange: str = ""                         # "" is the default exchange (routing key = queue)
    exchange_type: str = "direct"
    exchange_durable: bool = True              # as PerfTest declares its exchange
    queues: tuple[QueueDecl, ...] = ()
    bindings: tuple[tuple[str, str], ...] = ()  # (queue, routing key)


@dataclass(frozen=True)
class PublisherSpec:
    """What one producer publishes to and with which guarantees."""

    producer_id: int
    queue: str                                 # target queue/stream (for streams: the stream name)
    exchange: str = ""
    routing_key: str = ""
    confirm: bool = False
    confirm_window: int = 0                    # max unconfirmed messages; 0 = unbounded
    mandatory: bool = False
    persistent: bool = False
    message_format: Literal["amqp", "binary"] = "amqp"   # streams: AMQP 1.0 or raw body
    content_type: str | None = None
    properties: tuple[tuple[str, Any], ...] = ()   # further basic properties (AMQP names), e.g. priority, headers
    random_routing_key: bool = False               # a random key per message instead of routing_key
    routing_key_cache: int = 0                     # with random_routing_key: cycle this many keys; 0 = always new
    tx_size: int = 0                               # tx.commit every N messages; 0 = no transactions


@dataclass(frozen=True)
class ConsumerSpec:
    """How one consumer takes messages off a queue."""

    consumer_id: int
    queue: str
    prefetch: int = 0                          # basic.qos / stream credit; 0 = unlimited
    auto_ack: bool = False
    multi_ack_every: int = 0                   # ack with multiple=true every N messages; 0/1 = each
    processing_delay_us: int = 0               # simulated work per message, before its ack
    offset: str = "first"                      # streams: first | last | next | offset:N | timestamp:MS
    single_active: bool = False                # streams: single active consumer
    message_format: Literal["amqp", "binary"] = "amqp"
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    rate: float | None = None                  # max msg/s finished (acked) per consumer; None = unlimited
    global_prefetch: int = 0                   # basic.qos global=true on the channel; 0 = none
    nack: bool = False                         # basic.nack every message instead of acking it
    requeue: bool = True                       # with nack
    tx_size: int = 0                           # acks in transactions, tx.commit every N messages


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
    phase: str = "spread"                      # producers' phases in the task: spread | random | aligned
    confirm_timeout_s: float | None = 30.0
    warmup_s: float = 0.0
    drain_timeout_s: float = 10.0
    reconnect_timeout_s: float = 60.0           # ride through a lost connection this long; 0 = a loss fails the task
    control: tuple[str, int] | None = None      # coordinator's progress/control endpoint
    metrics_port: int | None = None
    seed: int = 0
    extra: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    bodies: tuple[bytes, ...] = ()                      # body templates used in turn; () = zeros of `size`
    variable_size: tuple[tuple[int, float], ...] = ()   # (size, seconds) cycled from t0; () = fixed size
    consumer_start_delay_s: float = 0.0                 # consumers subscribe this long after t0
    consumer_start_interval_s: float = 0.0              # and this far apart within the task
    exit_when: str = "never"                            # never | empty | idle (see Consumer.exit_when)
    routes: tuple[tuple[int, tuple[str, ...]], ...] = ()  # producer → queues its messages reach (fan-out); () = unknown

    @property
    def end_offset_s(self) -> float:
        last = self.steps[-1]
        return last.offset_s + last.duration_s


@dataclass(frozen=True)
class FaultPlan:
    """One fault on one cluster, relative to that cluster's t0 (the coordinator executes it; docs/faults.md)."""

    index: int                          # position in the workload's faults list
    action: str                         # kill | stop | pause | restart
    node: str                           # as the workload names it (rabbit-2, or a fault_control.nodes name)
    at_s: float
    restart_after_s: float | None       # None: brought back when the run ends


@dataclass(frozen=True)
class FaultControlPlan:
    """How a cluster's faults are executed: the local cluster.sh, or command templates."""

    kind: Literal["local", "command"] = "local"
    commands: tuple[tuple[str, str], ...] = ()                          # verb (kill, start …) → template
    nodes: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()     # node → its placeholders
    timeout_s: float = 300.0


@dataclass(frozen=True)
class ClusterPlan:
    """One cluster's barrier stage: task i of the stage runs ``tasks[i]``; faults run beside it."""

    target: ClusterTarget
    tasks: tuple[TaskPlan, ...]
    faults: tuple[FaultPlan, ...] = ()
    fault_control: FaultControlPlan | None = None          # None when the cluster has no faults

    @property
    def name(self) -> str:
        return self.target.name


@dataclass(frozen=True)
class RunPlan:
    """A whole run, planned once (rbench.plan.plan_run); run.json, the status line and the stages read it."""

    run_id: str
    workload_name: str
    driver: str
    steps: tuple[StepWindow, ...]
    producers: int
    consumers: int
    warmup_s: float
    message_count: int | None
    colocate: bool
    clusters: tuple[ClusterPlan, ...]

    def target_rate(self, step: StepWindow) -> float | None:
        """The step's offered load over all producers, msg/s; None when unlimited."""
        return None if step.rate is None else step.rate * self.producers
