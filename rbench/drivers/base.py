"""The driver interface: the only thing the runtime knows about a protocol.

Kept deliberately small (see shared/DESIGN.md) so a native driver can replace the
aio-pika reference without the runtime changing. Drivers never import Spark.

Flow of one publish, as the runtime does it::

    await pub.ready()            # confirm window has room and the connection is not blocked
    stamp(payload, t_sent=now)   # runtime writes producer/seq/timestamps into the body prefix
    pub.publish(payload, seq)    # written (or buffered for the next write); never awaits

Outcomes come back through the ``PublishSink`` the runtime handed in: one
``on_confirm`` per sequence number (a multiple ack is expanded by the driver) and
``on_return`` with the returned body (the runtime reads seq from its stamp).

A connection that dies after ``open()`` (node killed, TCP cut, missed heartbeats, 320 from a
node going down) is one named error, ``rbench.errors.ConnectionLost``: a driver with
``reconnect = True`` raises it from every publisher's ``ready()``/``publish()`` from then on and
calls the ``on_lost`` callback given to ``open()`` once, so a task that only consumes learns of
it too. The driver does not reconnect by itself: the runtime (rbench/runtime/reconnect.py)
closes it, opens a fresh one on the next URI, declares again and re-opens every publisher and
consumer, each consumer with the spec its old one's ``resume_spec`` gives (docs/drivers.md, "When
a connection is lost").

What a driver cannot do it says with a flag the runtime reads, never by leaving a method out:
``Driver.reconnect`` (may the runtime ride through a lost connection) and ``Consumer.pausable``
(do ``pause()``/``resume()`` work); docs/drivers.md's feature matrix lists both per driver.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, Topology
from rbench.errors import ConfigError, ConnectionLost


class PublishSink(Protocol):
    """Where a publisher reports what the broker said about each message."""

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None: ...

    def on_return(self, body: bytes | memoryview, t_ns: int) -> None: ...


# Called for every delivered message with its body, the redelivered flag and the
# receive time (time.time_ns() taken as early as the driver can). Must not block.
OnMessage = Callable[[memoryview | bytes, bool, int], None]


@runtime_checkable
class Publisher(Protocol):
    async def ready(self) -> None:
        """Return once one more message may be published (window, flow control)."""

    def can_publish(self) -> bool:
        """True when ``ready()`` would return at once: the send clock publishes from its own callback
        while this holds, and awaits ``ready()`` only when it does not (rbench.runtime.producer)."""

    def publish(self, payload: bytes | bytearray | memoryview, seq: int) -> None:
        """Queue ``payload`` for writing; never awaits. ``seq`` identifies its confirm.

        The runtime reuses ``payload`` for the next message: copy it (or write it out)
        before returning, never keep a reference."""

    async def drain(self, timeout: float) -> int:
        """Wait until every published message is confirmed; return how many are still
        outstanding when ``timeout`` seconds pass (0 when all came in)."""

    async def aclose(self) -> None: ...


@runtime_checkable
class Consumer(Protocol):
    # True when pause()/resume() stop and restart this consumer's deliveries (consumer.pause, docs/broker.md);
    # False: the driver cannot, pause()/resume() raise ConfigError (cannot_pause), and the runtime leaves it be
    # (the matrix's `pause` column; rbench.plan refuses consumer.pause for such a driver before a run)
    pausable: bool

    async def pause(self) -> None:
        """Stop deliveries until ``resume()``: what was delivered is still handed on and acked, the rest waits
        in the queue. Pausing a paused consumer does nothing."""

    async def resume(self) -> None:
        """Deliver again after ``pause()``, with the same settings (prefetch, arguments); resuming a consumer
        that is not paused does nothing."""

    def resume_spec(self, spec: ConsumerSpec) -> ConsumerSpec:
        """The spec to subscribe ``spec``'s consumer again with on a fresh driver after a lost connection.

        ``spec`` itself where the broker gives back what was unacked (flagged redelivered); a stream, which has
        no acks, goes on from the first offset this consumer had not handled, so nothing is delivered twice
        and nothing published meanwhile is missed."""

    async def aclose(self) -> None:
        """Cancel the subscription; messages still in flight may be redelivered elsewhere."""


@runtime_checkable
class Losable(Protocol):
    """A driver whose connection the runtime can declare lost: when one of a task's several connections dies,
    the others' publishers and consumers must raise ConnectionLost too (not a closed-by-the-client error), so
    every producer waits for the one reconnect (rbench.runtime.connections)."""

    def lose(self, error: ConnectionLost) -> None:
        """End the connection's work with ``error`` at once, without calling on_lost; aclose() still follows."""


@runtime_checkable
class IdleChannel(Protocol):
    """A driver that can hold a connection open with one channel and send nothing (idle_connections)."""

    async def open_idle_channel(self) -> None:
        """Open one channel on the connection and keep it until ``aclose()``."""


def cannot_pause(driver: str) -> ConfigError:
    """What pause()/resume() of a consumer whose ``pausable`` is False raise."""
    return ConfigError(f"consumer.pause: the {driver} driver cannot pause a consumer (docs/drivers.md)")


# Called at most once, on the event loop, when a connection of an opened driver ends (never because of
# aclose()), with why: a ConnectionLost is ridden through, any other error (a connection.close with a
# reply code other than 320) fails the task. Must not block: the runtime only schedules work from here.
OnLost = Callable[[BaseException], None]


@runtime_checkable
class Driver(Protocol):
    # True when the driver keeps the connection-loss promise above (ConnectionLost from ready()/
    # publish(), on_lost called, consumers' deliveries carry the broker's redelivered flag), so the
    # runtime may ride through a loss; False: a loss fails the task (the matrix's `reconnect` column)
    reconnect: bool
    # the URI, exactly as the target lists it, that the open connection went to (None before open()):
    # the runtime fails over to the URIs after it and reports where it reconnected (masked)
    uri: str | None

    @property
    def server_properties(self) -> Mapping[str, Any]:
        """What the broker said about itself when the connection opened (AMQP 0.9.1 connection.start, stream
        peer properties, AMQP 1.0 open: RabbitMQ sends product, version, platform, cluster_name); {} before
        open(). The broker probe reads it, so a run knows which broker it reached without a second connection
        (rbench.coordinator.broker_identity)."""

    async def open(self, target: ClusterTarget, on_lost: OnLost | None = None, name: str | None = None) -> None:
        """Connect to the first of ``target``'s URIs that answers. ``name``: the connection's connection_name
        client property where the protocol has one (the management UI and /api/connections show it); None:
        "rbench CLUSTER"."""

    async def declare(self, topology: Topology) -> None: ...

    async def publisher(self, spec: PublisherSpec, sink: PublishSink) -> Publisher: ...

    async def consumer(self, spec: ConsumerSpec, on_message: OnMessage) -> Consumer: ...

    async def messages_ready(self, queue: str) -> int:
        """Messages waiting in ``queue`` for delivery, as the broker counts them now (not those delivered and
        unacked): consumer exit_when: empty asks it. A stream never empties, so the stream driver raises
        ConfigError."""

    async def aclose(self) -> None: ...


# name in the workload → "module:factory". Factories take no arguments.
DRIVERS: dict[str, str] = {
    "aiopika": "rbench.drivers.aiopika:AioPikaDriver",
    "amqp091": "rbench.drivers.amqp091:Amqp091Driver",
    "amqp10": "rbench.drivers.amqp10:Amqp10Driver",
    "stream": "rbench.drivers.stream:StreamDriver",
}


def load_driver(name: str) -> Driver:
    """Instantiate the driver a workload names; unknown names are a ConfigError."""
    try:
        path = DRIVERS[name]
    except KeyError:
        raise ConfigError(f"driver: expected one of {', '.join(sorted(DRIVERS))}, got {name!r}") from None
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"driver: {name!r} is not available in this build ({exc})") from None
    factory: Callable[[], Driver] = getattr(module, attr)
    return factory()

