"""The workload's fields and what they imply (its steps, driver, task split), before the rules of checks.py.

WorkloadFields is not a validated workload: rbench.config.model.Workload is, by adding the
cross-field rules of rbench.config.checks, which read the views defined here.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from rbench.config.base import MAX_COUNT, MAX_PORT, StrictModel
from rbench.config.clients import Consumer, Publisher, Schedule
from rbench.config.cluster import Cluster, Fault
from rbench.config.connections import MAX_CONNECTIONS_PER_TASK, Churn, Connections, ConnectRate, layout
from rbench.config.durations import Seconds
from rbench.config.observe import BrokerMetrics, Progress, Regress
from rbench.config.rates import RateSearch, RateStep, SizeStep
from rbench.config.topology import Exchange, Queues
from rbench.config.types import ChurnSpec, ConnectionLayout


class WorkloadFields(StrictModel):
    """The fields of a workload file, and the views of them the planner and the checks read."""

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
    connections: Connections | None = Field(
        default=None, description="AMQP connections per task: per_task (one, every client a channel on it; the default "
                                  "of workload files), per_client (one per producer and per consumer, as PerfTest; "
                                  "the default of `rbench perftest`) or N (clients round-robin over N); "
                                  "docs/connections.md.")
    producer_channels: int = Field(default=1, ge=1, le=MAX_COUNT, description="With connections: per_client, this many "
                                   "consecutive producers of a task share one connection (PerfTest -X).")
    consumer_channels: int = Field(default=1, ge=1, le=MAX_COUNT, description="With connections: per_client, this many "
                                   "consecutive consumers of a task share one connection (PerfTest -Y).")
    idle_connections: int = Field(default=0, ge=0, le=MAX_CONNECTIONS_PER_TASK, description="Per task: connections "
                                  "that open a channel, heartbeat and send nothing (the memory test).")
    connect_rate: ConnectRate | None = Field(default=None, gt=0, description="Pace every connection a task opens "
                                             "(clients', idle, reconnects) at R/s, e.g. 50/s; null = as fast as they open.")
    churn: Churn | None = Field(default=None, description="Per task: connections opened and closed at R/s while the "
                                "load runs, in every step that does not set its own (docs/connections.md, \"Churn\").")
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
    def _consumers_per_queue(self) -> WorkloadFields:
        """consumers_per_queue sets consumers (N × queues), once, while validating."""
        if self.consumers_per_queue is not None:
            total = self.consumers_per_queue * self.queues.count()
            if "consumers" in self.model_fields_set and self.consumers != total:
                raise ValueError(f"consumers: {self.consumers} conflicts with consumers_per_queue "
                                 f"({self.consumers_per_queue} x {total // self.consumers_per_queue} queues = {total}); give one")
            object.__setattr__(self, "consumers", total)     # frozen model: set once, while validating
        return self

    def broker_metrics_of(self, cluster: Cluster) -> BrokerMetrics:
        """How ``cluster``'s broker is sampled: its own broker_metrics, else the workload's."""
        return cluster.broker_metrics if cluster.broker_metrics is not None else self.broker_metrics

    def run_length(self) -> float:
        """Seconds from t0 to the planned end of the load (the last step's end)."""
        return sum(s.duration for s in self.steps())

    def fault_targets(self, fault: Fault) -> list[Cluster]:
        """The clusters a fault acts on: its own, or every cluster whose fault executor has the node."""
        candidates = [c for c in self.clusters if fault.cluster in (None, c.name)]
        return [c for c in candidates if c.has_node(fault.node)]

    def most_tasks(self) -> int:
        """The most Spark tasks the workload can keep busy: its queues when each lives in one task, else its clients."""
        return self.queues.count() if self.colocate else max(self.producers, self.consumers, 1)

    def task_of(self, client: int, n_tasks: int) -> int:
        """The task of producer (or consumer) ``client`` among ``n_tasks``: with colocate, its queue's (client i
        uses queue i mod Q, and queue k lives in task k mod n_tasks), else i mod n_tasks, as PerfTest spreads them."""
        return (client % self.queues.count() if self.colocate else client) % n_tasks

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
                steps.append(RateStep(rate=base.rate, duration=length, churn=base.churn))
                elapsed += length
                i += 1
            return steps
        # message-count runs without a duration get one open-ended step (see plan.UNBOUNDED_S)
        return [RateStep(rate=self.rate, duration=self.duration or 365 * 86400.0)]

    def step_churn(self, step: RateStep) -> ChurnSpec | None:
        """The churn a step runs: its own when it sets one, else the workload's (None: no churn)."""
        churn = step.churn if step.churn is not None else self.churn
        return None if churn is None else churn.spec()

    def connection_layout(self) -> ConnectionLayout:
        """The connection fields as the plan hands them to each task."""
        return layout(self.connections, self.producer_channels, self.consumer_channels, self.idle_connections,
                      self.connect_rate)

    def resolved_driver(self) -> str:
        if self.driver is not None:
            return self.driver
        return "stream" if self.queues.type == "stream" else "amqp091"
