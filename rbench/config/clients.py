"""What each producer and consumer does: publisher options, send placement in time, consumer options and pause."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rbench.config.base import MAX_COUNT, MAX_PREFETCH, StrictModel
from rbench.config.durations import Seconds


class StreamFilterValues(StrictModel):
    """Stream filtering (RabbitMQ 3.13+): the filter value each message is published with (docs/streams.md)."""

    values: list[str] = Field(min_length=1, max_length=64, description="The filter values messages carry, e.g. [eu, us, asia].")
    weights: list[float] | None = Field(default=None, description="Each value's share of the messages (same length as values); null = equal shares.")
    unfiltered: float = Field(default=0.0, ge=0.0, lt=1.0, description="Share of the messages published with no filter value.")

    @model_validator(mode="after")
    def _shares(self) -> StreamFilterValues:
        for v in self.values:
            if not v or len(v.encode()) > 255:
                raise ValueError(f"values: expected non-empty values of at most 255 bytes, got {v!r}")
        if len(set(self.values)) != len(self.values):
            raise ValueError("values: expected each value once")
        if self.weights is not None:
            if len(self.weights) != len(self.values):
                raise ValueError(f"weights: expected {len(self.values)} weights (one per value), got {len(self.weights)}")
            if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
                raise ValueError("weights: expected weights >= 0 with a positive sum")
        return self


class Publisher(StrictModel):
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
    filter: StreamFilterValues | None = Field(default=None, description="Streams: publish each message with a filter value (RabbitMQ 3.13+).")


class Schedule(StrictModel):
    """How each producer's sends are placed in time (docs/timing.md)."""

    phase: Literal["spread", "random", "aligned"] = Field(
        default="spread",
        description="spread: a task's producers evenly over one send interval (default; independent clients drift "
                    "apart like this); random: a uniform random offset each; aligned: all at the same instant "
                    "(bursts of N producers, for burst tests; rbench before 0.2).")


class Pause(StrictModel):
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


class Consumer(StrictModel):
    prefetch: int = Field(default=0, ge=0, le=MAX_PREFETCH, description="basic.qos prefetch count (stream: credit); 0 = unlimited.")
    auto_ack: bool = False
    multi_ack_every: int = Field(default=0, ge=0, description="Ack with multiple=true every N messages.")
    processing_delay: Seconds = Field(default=0.0, description="Simulated work per message before its ack (PerfTest -L, in µs there).")
    message_count: int | None = Field(default=None, gt=0, description="Stop each consumer after this many messages (PerfTest -D).")
    offset: str = Field(default="first", description="Streams: first | last | next | offset:N | timestamp:MS.")
    single_active: bool = False
    filter: list[str] = Field(default_factory=list, max_length=64, description="Streams: receive only messages with these filter values (RabbitMQ 3.13+); the broker filters per chunk, the consumer drops the rest.")
    match_unfiltered: bool = Field(default=False, description="Streams, with filter: also receive messages published without a filter value.")
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
