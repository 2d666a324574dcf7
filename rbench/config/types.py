"""Plain frozen dataclasses: the plan of a run, handed from the coordinator to executors.

pydantic stays at the YAML boundary (rbench.config.model); executors receive these
picklable, dependency-free values so a task never re-validates or imports pydantic
(tests/unit/test_imports.py holds the task runtime to that).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rbench.config.stream_filter import FilterSpread
from rbench.samples.variant import BrokerVariant


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
    variant: BrokerVariant | None = None       # the broker variant the URIs reach (conf/variants), for run.json


@dataclass(frozen=True)
class QueueDecl:
    """A queue (or stream) to declare; ``arguments`` go to the broker verbatim."""

    name: str
    durable: bool = True
    auto_delete: bool = False
    exclusive: bool = False
    arguments: tuple[tuple[str, Any], ...] = ()
    partitions: tuple[str, ...] = ()           # a super stream: its partition streams, in partition order

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
    filter: FilterSpread | None = None             # streams: each message's filter value (rbench.config.stream_filter)
    partitions: tuple[str, ...] = ()               # super stream: its partitions; ``queue`` is the super stream
    routing_keys: int = 0                          # super stream: message n's key is str(n mod routing_keys)


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
    filter: tuple[str, ...] = ()               # streams: the filter values subscribed to; () = no filtering
    match_unfiltered: bool = False             # with filter: messages published without a value too
    filter_spread: FilterSpread | None = None  # the publishers' spread: the client-side filter recomputes values
    partitions: tuple[str, ...] = ()           # super stream: its partitions; ``queue`` is the super stream


@dataclass(frozen=True)
class ChurnSpec:
    """Connections a task opens and closes during a step (docs/connections.md, "Churn"): ``rate`` per second,
    each opening a channel (``channel``) and declaring an exclusive auto-delete queue (``declare``) first."""

    rate: float
    channel: bool = True
    declare: bool = False

    def describe(self) -> str:
        """What one churned connection does, in words (run.json, the summary)."""
        return "open, " + "".join(part for part, on in (("channel, ", self.channel), ("declare, ", self.declare))
                                  if on) + "close"


@dataclass(frozen=True)
class StepWindow:
    """A rate step relative to the run's t0: [offset_s, offset_s + duration_s)."""

    index: int
    rate: float | None          # per producer; None = unlimited
    offset_s: float
    duration_s: float
    churn: ChurnSpec | None = None    # connections each task opens and closes during the step


@dataclass(frozen=True)
class MetricsAccess:
    """Who may read a /metrics endpoint, and how it is served (docs/metrics.md, "Who can read /metrics").

    The same for the run-wide endpoint and every task's: the address to bind, an optional HTTP basic-auth user
    (the password is held as its SHA-256 only, never in clear, and never shown: ``repr`` hides it) and an optional
    certificate and key, carried as PEM text so that executors on other hosts can serve HTTPS too (Spark carries
    the task plans: the same trust as the control channel's secret, docs/cluster.md "Security")."""

    bind: str = "0.0.0.0"
    user: str | None = None
    password_sha256: bytes | None = field(default=None, repr=False)
    tls_cert_pem: bytes | None = field(default=None, repr=False)
    tls_key_pem: bytes | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.tls_cert_pem is not None and self.tls_key_pem is not None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"


OPEN_METRICS = MetricsAccess()      # the default: any address, no auth, plain HTTP (docs/metrics.md)

@dataclass(frozen=True)
class ControlEndpoint:
    """Where a task reaches the coordinator's control channel, and what lets it in (rbench.live.control.auth).

    ``secret`` is made per run by the coordinator and travels only inside the pickled TaskPlan, i.e. over
    Spark's own channel (authenticated and encrypted when spark.authenticate and
    spark.network.crypto.enabled are on: docs/cluster.md, "Security"); it is never in run.json, a log or
    a repr. ``tls_sha256``: the SHA-256 of the coordinator's TLS certificate (DER) when the channel runs
    over TLS; the task accepts that certificate and no other (pinned, no CA)."""

    host: str
    port: int
    secret: bytes = field(default=b"", repr=False)
    tls_sha256: bytes | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port


@dataclass(frozen=True)
class ConnectionLayout:
    """How a task spreads its clients over AMQP connections, and what else it opens (docs/connections.md).

    ``mode``: ``per_task`` (one connection, every client a channel on it: rbench's layout before issue 32),
    ``per_client`` (one per producer and per consumer as PerfTest and omq do; ``producer_channels``
    consecutive producers of the task share one, PerfTest's -X, likewise ``consumer_channels`` and -Y) or
    ``fixed`` (``count`` connections, clients round-robin over them: producers first, then consumers).
    ``idle`` more connections open a channel and send nothing; ``connect_rate`` paces every connection
    the task opens (None: as fast as they open)."""

    mode: Literal["per_task", "per_client", "fixed"] = "per_task"
    count: int = 1
    producer_channels: int = 1
    consumer_channels: int = 1
    idle: int = 0
    connect_rate: float | None = None

    def client_connections(self, producers: int, consumers: int) -> int:
        """How many connections a task with these clients opens for them (at least one: the declarations')."""
        if self.mode == "per_task":
            return 1
        if self.mode == "fixed":
            return self.count
        return max(1, -(-producers // self.producer_channels) + -(-consumers // self.consumer_channels))

    def publisher_connection(self, index: int) -> int:
        """The connection (0-based, in the task) of the task's ``index``-th publisher."""
        if self.mode == "per_task":
            return 0
        if self.mode == "fixed":
            return index % self.count
        return index // self.producer_channels

    def consumer_connection(self, index: int, producers: int) -> int:
        """The connection of the task's ``index``-th consumer (``producers``: the task's publishers)."""
        if self.mode == "per_task":
            return 0
        if self.mode == "fixed":
            return (producers + index) % self.count
        return -(-producers // self.producer_channels) + index // self.consumer_channels


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
    control: ControlEndpoint | None = None      # coordinator's progress/control endpoint
    metrics_port: int | None = None
    metrics_access: MetricsAccess = OPEN_METRICS   # where the task's /metrics listens, its auth and TLS
    seed: int = 0
    extra: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    bodies: tuple[bytes, ...] = ()                      # body templates used in turn; () = zeros of `size`
    variable_size: tuple[tuple[int, float], ...] = ()   # (size, seconds) cycled from t0; () = fixed size
    consumer_start_delay_s: float = 0.0                 # consumers subscribe this long after t0
    consumer_start_interval_s: float = 0.0              # and this far apart within the task
    exit_when: str = "never"                            # never | empty | idle (see Consumer.exit_when)
    routes: tuple[tuple[int, tuple[str, ...]], ...] = ()  # producer → queues its messages reach (fan-out); () = unknown
    connections: ConnectionLayout = ConnectionLayout()    # clients over connections, idle ones, pacing

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
