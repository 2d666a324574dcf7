"""The workload file, validated at the YAML boundary.

Field names follow RabbitMQ PerfTest's vocabulary where one exists (producers,
consumers, rate, size, prefetch, multi_ack_every, confirm window) so a PerfTest user
can read a workload file without a glossary; `rbench perftest` maps its flags here.
"""
from __future__ import annotations

import re
import string
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rbench.config.durations import Seconds
from rbench.config.uri import AMQP_SCHEMES, STREAM_SCHEMES, parse_uri
from rbench.errors import ConfigError
from rbench.faults.executor import template_refusal
from rbench.faults.terms import FAULT_STEPS, FAULT_VERBS, is_loopback_host, local_index, local_node_names

# RabbitMQ's max_message_size default in 3.8-3.13 (134217728 bytes, checked on 3.10.8 with
# `rabbitmqctl eval 'application:get_env(rabbit, max_message_size).'`); 4.0 lowered it to 16 MiB.
DEFAULT_MAX_MESSAGE_SIZE = 128 * 1024 * 1024
MAX_PORT = 65535
MAX_PREFETCH = 65535                 # basic.qos prefetch-count is a short
# sizes of what one run plans and holds in memory: far beyond any run a coordinator can drive, and
# low enough that a typo (queues.to: 1e12) is refused at validation instead of exhausting memory
MAX_COUNT = 100_000
MAX_STEPS = 10_000

QueueType = Literal["classic", "quorum", "stream"]


class _Model(BaseModel):
    # inf and nan are never a rate, size or duration (they used to pass and crash the planner)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)


FaultAction = Literal["kill", "stop", "pause", "restart"]         # rbench.faults.terms.FAULT_ACTIONS
_NODE_NAME = r"^[A-Za-z0-9_.@:-]+$"


class FaultCommands(_Model):
    """Shell command templates of a cluster's fault executor, one per verb (docs/faults.md).

    ``{node}`` is the node's name, ``{cluster}`` the cluster's, and every key a node gives under
    ``fault_control.nodes`` ({host}, {pod} …); values are shell-quoted. ``{{`` and ``}}`` are literal braces."""

    kill: str | None = Field(default=None, description="Crash the node, e.g. ssh {host} sudo pkill -9 -f beam.smp")
    start: str | None = Field(default=None, description="Start the node again (after kill or stop); it must rejoin the cluster.")
    stop: str | None = Field(default=None, description="Stop the node gracefully, e.g. ssh {host} sudo systemctl stop rabbitmq-server")
    pause: str | None = Field(default=None, description="Freeze the node, e.g. ssh {host} sudo pkill -STOP -f beam.smp")
    resume: str | None = Field(default=None, description="Unfreeze a paused node, e.g. ssh {host} sudo pkill -CONT -f beam.smp")

    def templates(self) -> dict[str, str]:
        return {verb: t for verb in FAULT_VERBS if (t := getattr(self, verb)) is not None}


class FaultControl(_Model):
    """How a cluster's faults are executed (docs/faults.md): ``local`` (the default; the nodes
    rabbit-1 … rabbit-<nodes> of scripts/cluster.sh on this machine) or, for a real cluster,
    ``{command: {kill: …, start: …}, nodes: …}``: each action is a command the coordinator runs."""

    command: FaultCommands | None = Field(default=None, description="Command templates; absent: local.")
    nodes: list[Annotated[str, Field(pattern=_NODE_NAME)]] | dict[Annotated[str, Field(pattern=_NODE_NAME)], dict[str, str | int]] | None = Field(
        default=None, description="The nodes a fault may name: a list of names, or name → its placeholders ({host: 10.0.0.2}).")
    timeout: Seconds = Field(default=120.0, gt=0, description="A command still running after this long is killed and "
                                                              "logged as a failed action.")

    @model_validator(mode="before")
    @classmethod
    def _local(cls, value: Any) -> Any:
        if value == "local":
            return {}
        if not isinstance(value, dict):
            raise ValueError("expected local, or a mapping with command and nodes")
        return value

    @property
    def local(self) -> bool:
        return self.command is None

    def node_vars(self) -> dict[str, dict[str, str]]:
        if self.nodes is None:
            return {}
        if isinstance(self.nodes, list):
            return {n: {} for n in self.nodes}
        return {n: {k: str(v) for k, v in fields.items()} for n, fields in self.nodes.items()}

    @model_validator(mode="after")
    def _placeholders(self) -> FaultControl:
        """Every placeholder of every template is known for every node, so no command fails to format mid-run."""
        if self.command is None:
            if self.nodes is not None:
                raise ValueError("nodes: only with command (the local cluster's nodes are rabbit-1 … rabbit-<nodes>)")
            return self
        if not self.nodes:
            raise ValueError("nodes: expected the nodes the commands act on (a list of names, or name → placeholders)")
        templates = self.command.templates()
        if not templates:
            raise ValueError("command: expected at least one of " + ", ".join(FAULT_VERBS))
        nodes = self.node_vars()
        for verb, template in templates.items():
            try:
                names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
            except ValueError as exc:
                raise ValueError(f"command.{verb}: {exc} (write {{{{ and }}}} for literal braces)") from None
            if (refusal := template_refusal(template)) is not None:
                raise ValueError(f"command.{verb}: {refusal}")
            for name in names:
                if not name.isidentifier():
                    raise ValueError(f"command.{verb}: expected placeholders such as {{node}} or {{host}}, got {{{name}}}")
                if name in ("node", "cluster"):
                    continue
                missing = [n for n, fields in nodes.items() if name not in fields]
                if missing:
                    raise ValueError(f"nodes: {missing[0]} gives no {name!r}, which command.{verb} uses ({{{name}}})")
        return self


class Cluster(_Model):
    """A broker target; node count, instance and volume type feed the cost model."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$",
                      description="Name used in every sample row and in the leaderboards.")
    uris: list[str] = Field(min_length=1, description="AMQP 0.9.1 URIs (amqp:// or amqps://), tried in order.")
    stream_uris: list[str] = Field(default_factory=list,
                                   description="rabbitmq-stream:// URIs; derived from uris (port 5552) when empty.")
    nodes: int = Field(default=1, ge=1, le=10_000)
    instance_type: str = Field(default="local", description="Key of conf/costs.yaml instance_types.")
    volume_type: str = Field(default="local", description="Key of conf/costs.yaml volume_types.")
    volume_gb: int = Field(default=0, ge=0)
    volume_iops: int | None = Field(default=None, ge=0, description="Provisioned IOPS per node; default: the volume type's baseline.")
    max_message_size: int = Field(default=DEFAULT_MAX_MESSAGE_SIZE, ge=1, le=512 * 1024 * 1024,
                                  description="The broker's max_message_size in bytes (RabbitMQ 3.8-3.13 default 128 MiB, "
                                              "4.x 16 MiB, at most 512 MiB); bodies larger than this are refused at validation.")
    fault_control: FaultControl = Field(
        default_factory=FaultControl, description="How the workload's faults act on this cluster: local (the nodes "
                                                  "rabbit-1 … rabbit-<nodes> of scripts/cluster.sh on this machine) or "
                                                  "command templates for a real cluster (docs/faults.md).")

    def fault_nodes(self) -> tuple[str, ...]:
        """The node names a fault may give for this cluster (empty: faults cannot reach it)."""
        if self.fault_control.local:
            return local_node_names(self.nodes) if self.local_uris() else ()
        return tuple(self.fault_control.node_vars())

    def local_uris(self) -> bool:
        """Every URI names this machine: the local fault executor may act for this cluster."""
        return all(is_loopback_host(parse_uri(u, AMQP_SCHEMES).host) for u in self.uris)

    def has_node(self, node: str) -> bool:
        if self.fault_control.local:
            i = local_index(node)
            return i is not None and i <= self.nodes and self.local_uris()
        return node in self.fault_control.node_vars()

    @field_validator("uris", "stream_uris")
    @classmethod
    def _parsed(cls, uris: list[str], info: Any) -> list[str]:
        """Every URI is read here by the one parser the drivers use (rbench.config.uri), so a URI
        that validates is one every driver can open and every message can mask."""
        schemes = AMQP_SCHEMES if info.field_name == "uris" else STREAM_SCHEMES
        for i, uri in enumerate(uris):
            try:
                parse_uri(uri, schemes)
            except ConfigError as exc:
                raise ValueError(f"[{i}] {exc}") from None
        return uris


class RateStep(_Model):
    """One level of an increasing-intensity run: per-producer rate held for a duration."""

    rate: float | None = Field(description="msg/s per producer; null for unlimited.")
    duration: Seconds = Field(gt=0)

    @field_validator("rate")
    @classmethod
    def _positive(cls, rate: float | None) -> float | None:
        if rate is not None and rate <= 0:
            raise ValueError("expected a rate > 0 msg/s per producer, or null for unlimited")
        return rate


class Queues(_Model):
    """Which queues, of which type, with which arguments (PerfTest -u / --queue-pattern / -qa)."""

    name: str | None = Field(default=None, description="A single queue name (PerfTest -u).")
    pattern: str | None = Field(default=None, description="printf-style pattern with %d, e.g. perf-test-%d.")
    from_: int = Field(default=1, alias="from", ge=0, le=10**9)
    to: int = Field(default=1, ge=0, le=10**9)
    type: QueueType = "classic"
    durable: bool = True
    auto_delete: bool = False
    exclusive: bool = False
    predeclared: bool = Field(default=False, description="Queues exist already: do not declare (PerfTest -p).")
    keep: bool = Field(default=False, description="Leave the queues (streams) this run created on the broker; by default "
                                                   "they are deleted after the run (queues that existed before are never deleted).")
    bind: bool = Field(default=True, description="Bind each queue to the exchange with its routing key (PerfTest -sb turns it off).")
    arguments: dict[str, Any] = Field(default_factory=dict,
                                      description="Extra x-arguments, e.g. x-quorum-initial-group-size, x-max-in-memory-length.")

    @model_validator(mode="after")
    def _one_naming(self) -> Queues:
        if self.name and self.pattern:
            raise ValueError("give either name or pattern, not both")
        if self.pattern is not None:
            if "%d" not in self.pattern:
                raise ValueError("pattern: expected a pattern containing %d, e.g. perf-test-%d")
            if self.to < self.from_:
                raise ValueError(f"to: expected a number >= from ({self.from_}), got {self.to}")
            if self.to - self.from_ + 1 > MAX_COUNT:
                raise ValueError(f"to: expected at most {MAX_COUNT} queues (from {self.from_} to {self.from_ + MAX_COUNT - 1}), "
                                 f"got {self.to - self.from_ + 1}")
        if self.type != "classic" and (not self.durable or self.auto_delete or self.exclusive):
            raise ValueError(f"durable: {self.type} queues are always durable, never auto-delete or exclusive")
        if "x-queue-type" in self.arguments and self.arguments["x-queue-type"] != self.type:
            raise ValueError("arguments.x-queue-type: conflicts with type; set type instead")
        return self

    def names(self, workload_name: str) -> list[str]:
        if self.pattern is not None:
            return [self.pattern.replace("%d", str(i)) for i in range(self.from_, self.to + 1)]
        return [self.name or f"rbench-{workload_name}"]

    def broker_arguments(self) -> dict[str, Any]:
        args = dict(self.arguments)
        if self.type != "classic":
            args["x-queue-type"] = self.type
        return args


class Exchange(_Model):
    name: str = Field(default="direct", description='"" publishes through the default exchange.')
    type: str = Field(default="direct", pattern=r"^[A-Za-z0-9_.:-]+$",
                      description="direct, fanout, topic, headers or any type a broker plugin adds (x-consistent-hash …).")
    durable: bool = Field(default=False, description=(
        "Non-durable by default, as PerfTest declares its exchange, so rbench runs and PerfTest runs share the "
        "exchange 'direct' on one broker instead of one refusing the other (406 inequivalent arg 'durable'). "
        "It does not affect what survives a restart: that is the queue's durability and the message's persistence."))


class Publisher(_Model):
    confirm: bool = Field(default=False, description="Publisher confirms (PerfTest -c enables them).")
    confirm_window: int = Field(default=0, ge=0, description="Max unconfirmed messages per producer; 0 = unbounded.")
    confirm_timeout: Seconds | None = Field(default=30.0, description="Give up on a confirm after this long (PerfTest -ct); null waits until the drain timeout.")
    mandatory: bool = False
    persistent: bool = False
    random_start_delay: Seconds = Field(default=0.0, description="Each producer starts after a random delay in [0, this).")
    message_count: int | None = Field(default=None, gt=0, description="Stop each producer after this many messages (PerfTest -C).")
    message_format: Literal["amqp", "binary"] = Field(default="amqp", description="Streams: AMQP 1.0 message or raw body.")
    content_type: str | None = Field(default=None, description="content_type property of every message (PerfTest -T).")
    properties: dict[str, Any] = Field(default_factory=dict, description="AMQP basic properties by their AMQP names (priority, expiration, message_id …); 'headers' is a table (PerfTest -mp).")
    random_routing_key: bool = Field(default=False, description="A random routing key per message instead of the fixed one (PerfTest -K).")
    routing_key_cache: int = Field(default=0, ge=0, le=MAX_COUNT * 10, description="With random_routing_key: cycle through this many random keys; 0 = a new key per message (PerfTest -rkcs).")
    tx_size: int = Field(default=0, ge=0, description="Publish in AMQP transactions, committing every N messages; 0 = no transactions (PerfTest -m).")
    body_files: list[str] = Field(default_factory=list, description="Files whose contents are the bodies, used in turn; the first 24 bytes carry the stamp (PerfTest -B).")
    json_body: bool = Field(default=False, description="Random JSON documents of `size` bytes as bodies; the first 24 bytes carry the stamp (PerfTest --json-body).")
    json_body_fields: int = Field(default=1000, ge=1, le=MAX_COUNT, description="Distinct random fields the JSON bodies are built from (PerfTest -bfc).")
    json_bodies: int = Field(default=100, ge=1, le=MAX_COUNT, description="Distinct JSON bodies, used in turn (PerfTest -bc).")


class Schedule(_Model):
    """How each producer's sends are placed in time (docs/timing.md)."""

    phase: Literal["spread", "random", "aligned"] = Field(
        default="spread",
        description="spread: a task's producers evenly over one send interval (default; independent clients drift "
                    "apart like this); random: a uniform random offset each; aligned: all at the same instant "
                    "(bursts of N producers, for burst tests; rbench before 0.2).")


class Pause(_Model):
    """Stop every consumer at a point of the run and resume later: the backlog build-up and drain scenario."""

    at: Seconds = Field(ge=0, description="Pause this long after the load starts (t0).")
    until_backlog: int | None = Field(default=None, gt=0,
                                      description="Resume once the workload's queues hold this many messages in all "
                                                  "(broker depth; client counts when the broker cannot be read).")
    for_: Seconds | None = Field(default=None, alias="for", gt=0, description="Resume after this long.")
    drained_below: int = Field(default=0, ge=0,
                               description="A queue set counts as drained once its depth is at most this many messages.")

    @model_validator(mode="after")
    def _one_trigger(self) -> Pause:
        if (self.until_backlog is None) == (self.for_ is None):
            raise ValueError("give exactly one of until_backlog or for")
        return self


class Consumer(_Model):
    prefetch: int = Field(default=0, ge=0, le=MAX_PREFETCH, description="basic.qos prefetch count (stream: credit); 0 = unlimited.")
    auto_ack: bool = False
    multi_ack_every: int = Field(default=0, ge=0, description="Ack with multiple=true every N messages.")
    processing_delay: Seconds = Field(default=0.0, description="Simulated work per message before its ack (PerfTest -L, in µs there).")
    message_count: int | None = Field(default=None, gt=0, description="Stop each consumer after this many messages (PerfTest -D).")
    offset: str = Field(default="first", description="Streams: first | last | next | offset:N | timestamp:MS.")
    single_active: bool = False
    rate: float | None = Field(default=None, gt=0, description="Max msg/s per consumer, paced like processing_delay (PerfTest -R); null = unlimited.")
    global_prefetch: int = Field(default=0, ge=0, le=MAX_PREFETCH, description="basic.qos with global=true on the consumer's channel (PerfTest -Q); 0 = none.")
    nack: bool = Field(default=False, description="Reject every message with basic.nack instead of acking it (PerfTest -na).")
    requeue: bool = Field(default=True, description="With nack: requeue the rejected messages (PerfTest -re).")
    arguments: dict[str, Any] = Field(default_factory=dict, description="basic.consume arguments, e.g. x-priority, x-stream-offset (PerfTest -ca, -sco).")
    tx_size: int = Field(default=0, ge=0, description="Ack in AMQP transactions, committing every N messages; 0 = no transactions (PerfTest -n).")
    start_delay: Seconds = Field(default=0.0, description="Consumers start this long after publishing starts (PerfTest -csd).")
    start_interval: Seconds = Field(default=0.0, description="Within a task, consumers start this far apart (PerfTest -S: 1 s).")
    exit_when: Literal["never", "empty", "idle"] = Field(
        default="never", description="A consumer stops when its queue is empty or after 1 s without a message; the run ends when all have (PerfTest -ew).")
    pause: Pause | None = Field(default=None, description="Stop consuming at a point of the run, resume on a backlog or after a time (docs/broker.md).")

    @field_validator("offset")
    @classmethod
    def _offset(cls, value: str) -> str:
        kind, _, arg = value.partition(":")
        if kind in ("first", "last", "next") and not arg:
            return value
        if kind in ("offset", "timestamp") and arg.isdigit():
            return value
        raise ValueError("expected first, last, next, offset:N or timestamp:MS")


class Regress(_Model):
    """Thresholds of `rbench regress` for this workload's nightly history (docs/history.md); flags override."""

    alpha: float = Field(default=0.01, gt=0, lt=0.5,
                         description="False-alarm rate of the same-morning gate, per series (cluster, step, metric) per night.")
    change_point_alpha: float = Field(default=0.01, gt=0, lt=0.5,
                                      description="Permutation-test level of each change point over the whole series.")
    baseline_nights: int = Field(default=30, ge=5, description="At most this many nights before the recent ones are the baseline.")
    recent_nights: int = Field(default=3, ge=1, le=10, description="Tonight and up to this many - 1 nights before it are tested.")
    min_throughput_drop: float = Field(default=0.03, ge=0, lt=1,
                                       description="Smallest relative throughput drop reported as a regression (0.03 = 3 %).")
    min_latency_rise: float = Field(default=0.10, ge=0,
                                    description="Smallest relative latency rise reported as a regression (0.10 = 10 %).")
    metrics: list[str] | None = Field(default=None, description="steps.parquet columns to check; default rates and e2e/confirm percentiles.")


class SizeStep(_Model):
    """One level of a variable body size: bytes held for a duration (PerfTest -vs SIZE:SECONDS)."""

    size: int = Field(ge=0)
    duration: Seconds = Field(gt=0)


class Slo(_Model):
    """What a probe of a rate search must meet (exact figures over the probe's measured messages)."""

    p99: Seconds = Field(default=1.0, gt=0, description="End-to-end latency p99 from intended send time at most this.")
    consume_ratio: float = Field(default=0.98, gt=0, le=1,
                                 description="Achieved consume rate at least this share of the probe's target rate.")


class RateSearch(_Model):
    """Find the highest rate that meets the SLO: double from `start` until a probe fails, then bisect."""

    start: float = Field(gt=0, description="First probe's rate, msg/s per producer.")
    max: float = Field(gt=0, description="Highest rate probed, msg/s per producer; meeting it ends the search "
                                         "with 'capacity not reached'.")
    slo: Slo = Field(default_factory=Slo)
    step: Seconds = Field(default=60.0, gt=0, description="Length of each probe (a step of its own).")
    precision: float = Field(default=0.05, gt=0, lt=1, description="Stop when (first fail − last pass) ÷ last pass "
                                                                     "is at most this.")
    max_probes: int = Field(default=20, ge=2, le=100, description="Stop after this many probes whatever the bracket.")

    @model_validator(mode="after")
    def _bounds(self) -> RateSearch:
        if self.max < self.start:
            raise ValueError(f"max: expected at least start ({self.start:g} msg/s per producer), got {self.max:g}")
        return self


class Progress(_Model):
    """What the driver prints (and writes) while a run goes."""

    interval: Seconds = Field(default=1.0, ge=1.0, description="Seconds per status line and CSV row (PerfTest -i).")
    csv: str | None = Field(default=None, description="Write PerfTest's CSV columns to this file, one row per interval (PerfTest -o).")
    format: Literal["rbench", "default", "compact"] = Field(
        default="rbench", description="Status line: rbench's, or PerfTest's default or compact format (PerfTest -mf).")
    id: str | None = Field(default=None, description="Test id in PerfTest-format lines and the CSV id column (PerfTest -d); default: the workload name.")
    latency_unit: Literal["us", "ms"] = Field(default="us", description="Latency unit of PerfTest-format lines and the CSV (PerfTest -ms: ms).")


class BrokerMetrics(_Model):
    """What the coordinator samples on each cluster's broker while its stage runs (docs/broker.md)."""

    enabled: bool = Field(default=True, description="Sample the broker at all.")
    interval: Seconds = Field(default=1.0, ge=0.2, description="Seconds between samples.")
    source: Literal["management", "prometheus", "both"] = Field(
        default="both", description="management (HTTP API, port 15672), prometheus (port 15692) or both.")
    management_port: int = Field(default=15672, gt=0, lt=65536)
    prometheus_port: int = Field(default=15692, gt=0, lt=65536)
    management_scheme: Literal["http", "https"] = "http"
    management_urls: list[str] | None = Field(
        default=None, min_length=1,
        description="Management API bases (http://HOST:PORT/api), the first that answers speaks for the cluster; "
                    "default: each URI host at management_port.")
    prometheus_urls: list[str] | None = Field(
        default=None, min_length=1,
        description="Every node's metrics endpoint (http://HOST:PORT/metrics); default: each URI host at "
                    "prometheus_port. List them when nodes share a host on different ports.")

    @field_validator("management_urls", "prometheus_urls")
    @classmethod
    def _http_urls(cls, urls: list[str] | None) -> list[str] | None:
        for url in urls or []:
            if not re.match(r"^https?://[^/\s]+", url):
                raise ValueError(f"expected http:// or https:// URLs, got {url!r}")
        return urls


class Fault(_Model):
    """One fault of the run: at ``at`` after the load starts, do ``action`` to ``node`` (docs/faults.md)."""

    at: Seconds = Field(description="When, after the cluster's load starts (t0).")
    action: FaultAction = Field(description="kill (SIGKILL), stop (graceful), pause (SIGSTOP) or restart (stop, then "
                                            "start at once).")
    node: str = Field(min_length=1, pattern=_NODE_NAME,
                      description="rabbit-2 on the local cluster; a name of fault_control.nodes on a real one.")
    restart_after: Seconds | None = Field(default=None, gt=0,
                                          description="Bring the node back this long after the fault (start after kill "
                                                      "or stop, resume after pause); null: at the end of the run.")
    cluster: str | None = Field(default=None, description="The cluster; default every cluster that has the node.")


class Workload(_Model):
    """A whole run: where, how much, for how long."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    driver: Literal["amqp091", "aiopika", "stream", "amqp10"] | None = Field(
        default=None, description="Protocol driver; default amqp091, or stream when queues.type is stream. "
                                  "amqp10: AMQP 1.0 links (docs/amqp10.md).")
    clusters: list[Cluster] = Field(min_length=1)
    producers: int = Field(default=1, ge=0, le=MAX_COUNT)
    consumers: int = Field(default=1, ge=0, le=MAX_COUNT)
    consumers_per_queue: int | None = Field(default=None, ge=1, le=MAX_COUNT,
                                            description="N consumers on each of the queues; sets consumers to N x queues.")
    rate: float | None = Field(default=None, description="msg/s per producer; null = unlimited (PerfTest -r).")
    rate_steps: list[RateStep] | None = Field(default=None, description="Increasing-intensity steps; overrides rate and duration.")
    variable_rate: list[RateStep] | None = Field(default=None, description="PerfTest VALUE:SECONDS, cycled until duration ends.")
    rate_search: RateSearch | None = Field(default=None, description="Search the highest rate that meets an SLO "
                                                                     "(docs/rate-search.md); replaces rate, rate_steps and duration.")
    size: int = Field(default=24, ge=0, description="Body size in bytes; at least the 24-byte stamp is sent.")
    queues: Queues = Field(default_factory=Queues)
    exchange: Exchange = Field(default_factory=Exchange)
    routing_key: str | None = Field(default=None, description="Default: the queue name.")
    publisher: Publisher = Field(default_factory=Publisher)
    schedule: Schedule = Field(default_factory=Schedule)
    consumer: Consumer = Field(default_factory=Consumer)
    duration: Seconds | None = Field(default=None, gt=0, description="Run length (PerfTest -z) unless rate_steps set it.")
    warmup: Seconds = Field(default=0.0, description="Excluded from each step's statistics.")
    drain_timeout: Seconds = Field(default=10.0, description="After publishing stops, wait this long for confirms and consumers.")
    tasks: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(default="auto", description="Spark tasks; auto = min(queues, cores).")
    colocate: bool = Field(default=True, description="Keep a queue's producers and consumers in one task (one clock).")
    metrics_port: int | None = Field(default=None, ge=0, le=MAX_PORT, description="Prometheus port per executor host (0 = any free); null = off.")
    regress: Regress | None = Field(default=None, description="Thresholds for `rbench regress` (not part of the workload hash).")
    variable_size: list[SizeStep] | None = Field(default=None, description="Body sizes cycled over time, each held for its duration (PerfTest -vs).")
    startup_timeout: Seconds = Field(default=0.0, description="Keep retrying a broker that refuses connections this long before failing (PerfTest --servers-startup-timeout).")
    reconnect_timeout: Seconds = Field(default=60.0, ge=0, description="When a task's broker connection is lost mid-run, reconnect (next URI first) "
                                                                  "for up to this long before failing the task; 0 = fail at once (docs/drivers.md).")
    progress: Progress = Field(default_factory=Progress)
    broker_metrics: BrokerMetrics = Field(default_factory=BrokerMetrics)
    faults: list[Fault] = Field(default_factory=list, max_length=100,
                                description="Kill, stop, pause or restart broker nodes during the run (docs/faults.md).")

    @field_validator("rate")
    @classmethod
    def _rate(cls, rate: float | None) -> float | None:
        if rate is not None and rate <= 0:
            raise ValueError("expected a rate > 0 msg/s per producer, or null for unlimited")
        return rate

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.consumers_per_queue is not None:
            total = self.consumers_per_queue * len(self.queues.names(self.name))
            if "consumers" in self.model_fields_set and self.consumers != total:
                raise ValueError(f"consumers: {self.consumers} conflicts with consumers_per_queue "
                                 f"({self.consumers_per_queue} x {total // self.consumers_per_queue} queues = {total}); give one")
            object.__setattr__(self, "consumers", total)     # frozen model: set once, while validating
        names = [c.name for c in self.clusters]
        if len(set(names)) != len(names):
            raise ValueError("clusters: expected unique cluster names")
        if self.rate_steps is not None and self.variable_rate is not None:
            raise ValueError("rate_steps: give rate_steps or variable_rate, not both")
        if self.rate is not None and (self.rate_steps is not None or self.variable_rate is not None):
            other = "rate_steps" if self.rate_steps is not None else "variable_rate"
            raise ValueError(f"rate: give rate or {other}, not both ({other} sets the rate of each step)")
        limit = min(c.max_message_size for c in self.clusters)
        sizes = [("size", self.size)] + [(f"variable_size.{i}.size", s.size) for i, s in enumerate(self.variable_size or [])]
        for where, size in sizes:
            if size > limit:
                owner = next(c.name for c in self.clusters if c.max_message_size == limit)
                raise ValueError(f"{where}: expected at most {limit} bytes, the max_message_size of cluster {owner} "
                                 f"(RabbitMQ's default is 128 MiB; raise it on the broker and in the cluster's "
                                 f"max_message_size), got {size}")
        if self.metrics_port and isinstance(self.tasks, int) and self.metrics_port + self.tasks - 1 > MAX_PORT:
            raise ValueError(f"metrics_port: task i listens on metrics_port + i, so expected at most "
                             f"{MAX_PORT - self.tasks + 1} with {self.tasks} tasks, got {self.metrics_port}")
        if self.rate_search is not None:
            for other in ("rate", "rate_steps", "variable_rate", "duration"):
                if getattr(self, other) is not None:
                    raise ValueError(f"rate_search: give rate_search or {other}, not both (each probe sets its own rate and length)")
            if self.warmup >= self.rate_search.step:
                raise ValueError("warmup: expected less than rate_search.step")
        if self.rate_steps is not None and not self.rate_steps:
            raise ValueError("rate_steps: expected at least one step")
        if self.rate_steps is not None and len(self.rate_steps) > MAX_STEPS:
            raise ValueError(f"rate_steps: expected at most {MAX_STEPS} steps, got {len(self.rate_steps)}")
        if self.variable_rate is not None and not self.variable_rate:
            raise ValueError("variable_rate: expected at least one entry")
        if self.variable_rate is not None and self.duration is not None:
            cycle = sum(s.duration for s in self.variable_rate)
            if self.duration / cycle * len(self.variable_rate) > MAX_STEPS:
                raise ValueError(f"variable_rate: cycling it over duration {self.duration:g} s makes more than "
                                 f"{MAX_STEPS} steps; expected longer entries or a shorter duration")
        if self.variable_rate is not None and self.duration is None:
            raise ValueError("duration: variable_rate needs a duration to cycle over")
        if self.rate_steps is None and self.duration is None and self.publisher.message_count is None \
                and self.rate_search is None:
            raise ValueError("duration: expected a duration, rate_steps or publisher.message_count")
        if self.producers == 0 and self.consumers == 0:
            raise ValueError("producers: expected at least one producer or consumer")
        if self.warmup >= min(s.duration for s in self.steps()):
            raise ValueError("warmup: expected less than the shortest step's duration")
        if self.faults:
            self._check_faults()
        return self

    def run_length(self) -> float:
        """Seconds from t0 to the planned end of the load (the last step's end)."""
        return sum(s.duration for s in self.steps())

    def fault_targets(self, fault: Fault) -> list[Cluster]:
        """The clusters a fault acts on: its own, or every cluster whose fault executor has the node."""
        candidates = [c for c in self.clusters if fault.cluster in (None, c.name)]
        return [c for c in candidates if c.has_node(fault.node)]

    def _check_faults(self) -> None:
        """What a fault names must exist, fall inside the run and have the commands it needs."""
        if self.rate_search is not None:
            raise ValueError("faults: not with rate_search (each probe is a run of its own); use rate_steps")
        end = self.run_length()
        down: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        for i, f in enumerate(self.faults):
            where = f"faults[{i}]"
            if f.action == "restart" and f.restart_after is not None:
                raise ValueError(f"{where}.restart_after: restart starts the node again at once; drop restart_after "
                                 "or use stop")
            if f.at >= end:
                raise ValueError(f"{where}.at: expected a duration inside the run (0–{end:g} s), got {f.at:g}s")
            if f.cluster is not None and f.cluster not in {c.name for c in self.clusters}:
                raise ValueError(f"{where}.cluster: no cluster named {f.cluster!r} "
                                 f"(clusters: {', '.join(c.name for c in self.clusters)})")
            targets = self.fault_targets(f)
            if not targets:
                raise ValueError(f"{where}.node: {self._no_node(f)}")
            for c in targets:
                if c.fault_control.command is not None:
                    given = c.fault_control.command.templates()
                    for verb in FAULT_STEPS[f.action]:
                        if verb not in given:
                            j = self.clusters.index(c)
                            raise ValueError(f"{where}.action: {f.action} needs clusters[{j}].fault_control.command.{verb} "
                                             f"(cluster {c.name}), which is not given")
                key = (c.name, f"rabbit-{local_index(f.node)}" if c.fault_control.local else f.node)
                start = f.at
                # a restart is an instant (a nanosecond here); without restart_after a node is down until the end
                stop = f.at + 1e-9 if f.action == "restart" else (f.at + f.restart_after if f.restart_after else float("inf"))
                for other_start, other_stop, j in down.get(key, []):
                    if max(start, other_start) < min(stop, other_stop):
                        back = "the end of the run" if other_stop == float("inf") else f"{other_stop:g} s"
                        raise ValueError(f"{where}.at: {f.node} of cluster {c.name} is down from faults[{j}] "
                                         f"({other_start:g} s) until {back}; one fault per node at a time")
                down.setdefault(key, []).append((start, stop, i))

    def _no_node(self, f: Fault) -> str:
        """Why no cluster has the fault's node, naming the nodes there are."""
        parts = []
        for c in self.clusters:
            if f.cluster not in (None, c.name):
                continue
            if c.fault_control.local and not c.local_uris():
                parts.append(f"cluster {c.name}: none, its URIs name other hosts and fault_control is local "
                             f"(give fault_control.command for a real cluster)")
            elif c.fault_control.local:
                parts.append(f"cluster {c.name}: {', '.join(c.fault_nodes())} (the local cluster's nodes up to "
                             f"nodes: {c.nodes})")
            else:
                parts.append(f"cluster {c.name}: {', '.join(c.fault_nodes())} (fault_control.nodes)")
        return f"expected a node of {'; '.join(parts)}, got {f.node}"

    def steps(self) -> list[RateStep]:
        """The schedule as explicit steps (one step for a plain rate; a rate search's first probe)."""
        if self.rate_search is not None:
            return [RateStep(rate=self.rate_search.start, duration=self.rate_search.step)]
        if self.rate_steps is not None:
            return list(self.rate_steps)
        if self.variable_rate is not None:
            assert self.duration is not None
            steps, elapsed, i = [], 0.0, 0
            while elapsed < self.duration - 1e-9:
                base = self.variable_rate[i % len(self.variable_rate)]
                length = min(base.duration, self.duration - elapsed)
                steps.append(RateStep(rate=base.rate, duration=length))
                elapsed += length
                i += 1
            return steps
        # message-count runs without a duration get one open-ended step (see plan.UNBOUNDED_S)
        return [RateStep(rate=self.rate, duration=self.duration or 365 * 86400.0)]

    def resolved_driver(self) -> str:
        if self.driver is not None:
            return self.driver
        return "stream" if self.queues.type == "stream" else "amqp091"
