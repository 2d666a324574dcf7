"""Plain frozen dataclasses handed from the driver to executors.

pydantic stays at the YAML boundary (rbench.config.model); executors receive these
picklable, dependency-free values so a task never re-validates or imports pydantic.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Outcome = Literal["ack", "nack", "returned", "timeout", "unconfirmed"]
OUTCOMES: tuple[str, ...] = ("ack", "nack", "returned", "timeout", "unconfirmed")


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
    exchange_durable: bool = True
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
