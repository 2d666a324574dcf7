"""The ``stream`` driver: RabbitMQ Streams (port 5552) through rstream's connection handling.

Shape, and why:

* one locator connection per driver for declare/delete/metadata (this module), and one
  connection per publisher (stream_publisher, to the stream's leader) and per consumer
  (stream_consumer), so producers and consumers do not share a socket and their CPU and
  latency stay attributable; the connections themselves are stream_wire's;
* publishers give each message the runtime's ``seq`` as publishing id, so a
  ``PublishConfirm`` maps to ``PublishSink.on_confirm(seq, ...)`` with no lookup table;
  messages published in the same event-loop turn go out as one ``Publish`` frame
  (the batch-of-100 case is one frame, the single-message case is one frame per message);
* consumers subscribe with ``ConsumerSpec.prefetch`` as credit (in chunks; 0 means
  the rstream default of 10) and give one credit back per chunk handled, so
  ``on_message`` back-pressure reaches the broker; offsets as stream_consumer reads them;
* ``message_format``: ``amqp`` wraps the body in an AMQP 1.0 ``data`` section (written
  by the C frame builder in ext/codec/stream.pyx, byte-identical to
  ``rbench.codec.amqp10.encode_data``; consumers decode with ``amqp10.decode_data``),
  ``binary`` sends it raw. Either way the 24-byte stamp is the first bytes of the body
  the consumer sees.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rstream import schema

from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, QueueDecl, Topology
from rbench.drivers.base import OnLost, OnMessage, PublishSink
from rbench.drivers.connect import first_that_answers
from rbench.drivers.replies import PreconditionFailed
from rbench.drivers.stream_consumer import StreamConsumer, offset_spec, parse_offset
from rbench.drivers.stream_publisher import StreamPublisher
from rbench.drivers.stream_super import (
    PARTITION_ORDER,
    SuperStreamConsumer,
    SuperStreamPublisher,
    partition_consumer_spec,
    partition_spec,
)
from rbench.drivers.stream_wire import (
    CONNECT_TIMEOUT_S,
    StreamProtocol,
    open_connection,
    response_error,
    stream_uri_from_amqp,
)
from rbench.errors import BrokerError, ConfigError, ConnectError, ConnectionLost

log = logging.getLogger(__name__)

DEFAULT_CREDIT = 10
SAC_SINCE = (3, 11)             # single active consumer on streams
FILTER_SINCE = (3, 13)          # Publish v2 with filter values, filter.N subscription properties
SUPER_STREAM_COMMANDS_SINCE = (3, 13)   # CreateSuperStream / DeleteSuperStream

# x-argument of a stream queue → stream protocol Create argument
CREATE_ARGUMENTS = {
    "x-max-length-bytes": "max-length-bytes",
    "x-max-age": "max-age",
    "x-stream-max-segment-size-bytes": "stream-max-segment-size-bytes",
    "x-initial-cluster-size": "initial-cluster-size",
    "x-queue-leader-locator": "queue-leader-locator",
}


def stream_uris(target: ClusterTarget) -> tuple[str, ...]:
    """The target's rabbitmq-stream:// URIs, or its amqp:// URIs moved to port 5552."""
    if target.stream_uris:
        return tuple(target.stream_uris)
    if not target.uris:
        raise ConfigError(f"cluster {target.name!r}: no stream_uris and no uris to derive them from")
    return tuple(stream_uri_from_amqp(u) for u in target.uris)


def create_arguments(queue: QueueDecl) -> dict[str, str]:
    """Stream create arguments from a QueueDecl's x-arguments (x-queue-type dropped)."""
    out: dict[str, str] = {}
    for key, value in queue.arguments:
        if key == "x-queue-type":
            continue
        name = CREATE_ARGUMENTS.get(key)
        if name is None:
            raise ConfigError(f"stream {queue.name!r}: argument {key!r} is not a stream argument "
                              f"(expected one of {', '.join(sorted(CREATE_ARGUMENTS))})")
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


# ---------------------------------------------------------------- driver

class StreamDriver:
    """The ``stream`` driver (see the module docstring).

    It rides through a lost connection (``reconnect = True``, docs/drivers.md): any of its connections
    lost is one ``ConnectionLost`` for ``on_lost`` and the publishers; the fresh driver's publishers find
    the stream's leader again, and its consumers resume where the old ones stopped
    (``StreamConsumer.resume_spec``), so nothing is delivered twice. A metadata update (the stream deleted,
    or no longer available on this connection's node) still fails what uses that stream."""

    reconnect = True

    def __init__(self) -> None:
        self.uri: str | None = None
        self._uris: tuple[str, ...] = ()
        self._amqp_uris: tuple[str, ...] = ()
        self._uri = ""
        self._locator: StreamProtocol | None = None
        self._server: dict[str, str] = {}
        self._connections: list[StreamProtocol] = []   # publishers' and consumers', closed by aclose()
        self._on_lost: OnLost | None = None

    @property
    def server_properties(self) -> Mapping[str, Any]:
        return dict(self._server)

    async def open(self, target: ClusterTarget, on_lost: OnLost | None = None, name: str | None = None) -> None:
        """Connect the locator to the first stream URI that answers; ``on_lost`` hears once of any of this
        driver's connections lost (never because of ``aclose()``). ``name`` is not used: the stream driver
        names its own connections (rbench-locator, rbench-producer-N, rbench-consumer-N)."""
        self._on_lost = on_lost
        self._uris = stream_uris(target)
        self._amqp_uris = tuple(u for u in target.uris if u.startswith("amqp"))

        async def open_one(uri: str) -> str:
            self._locator, self._server = await open_connection(uri, "rbench-locator", timeout=CONNECT_TIMEOUT_S)
            return uri

        def why(uri: str, exc: BaseException) -> str | None:
            return getattr(exc, "reason", str(exc)) if isinstance(exc, ConnectError) else None

        # open_connection bounds each handshake itself; the shared deadline covers every URI
        self._uri = await first_that_answers(self._uris, open_one, CONNECT_TIMEOUT_S * len(self._uris) + 1, why,
                                             "RabbitMQ streams")
        self.uri = self._uri
        self._loc().on_lost = self._lost

    def _lost(self, err: ConnectionLost) -> None:
        on_lost, self._on_lost = self._on_lost, None
        if on_lost is not None:
            on_lost(err)

    def _loc(self) -> StreamProtocol:
        if self._locator is None:
            raise BrokerError("stream driver used before open()")
        return self._locator

    async def declare(self, topology: Topology) -> None:
        """Create every stream of the topology; an existing one must have the same arguments."""
        if topology.exchange or topology.bindings:
            raise ConfigError("stream driver: exchanges and bindings are not part of the stream protocol; "
                              "publish to the stream by name")
        for queue in topology.queues:
            if not queue.is_stream:
                raise ConfigError(f"stream driver: queue {queue.name!r} is x-queue-type={queue.queue_type}, "
                                  "expected stream")
            if queue.partitions:
                await self.create_super_stream(queue)
            else:
                await self.create_stream(queue)

    async def create_super_stream(self, queue: QueueDecl) -> None:
        """A super stream: CreateSuperStream where the broker has it (3.13+), else its partitions as streams and
        the exchange with their bindings over AMQP 0.9.1 (stream_super's docstring). Existing is fine."""
        if self.broker_version() >= SUPER_STREAM_COMMANDS_SINCE:
            loc = self._loc()
            args = create_arguments(queue)
            resp: Any = await loc.request(schema.CreateSuperStream(
                loc.next_corr(), super_stream=queue.name, partitions=list(queue.partitions),
                binding_keys=[str(i) for i in range(len(queue.partitions))],
                arguments=[schema.Property(k, v) for k, v in args.items()]),
                f"create super stream {queue.name!r}", ok_codes=(1, 5))
            if resp.response_code == 1:
                return
        for part in queue.partitions:             # the partitions exist already, or are made here
            await self.create_stream(replace(queue, name=part, partitions=()))
        await self._bind_partitions(queue)

    async def _bind_partitions(self, queue: QueueDecl) -> None:
        """The super stream's exchange and bindings over AMQP 0.9.1 (the stream protocol cannot bind before 3.13)."""
        if not self._amqp_uris:
            raise ConfigError(f"queues.super_stream: {queue.name!r} needs an AMQP URI on this broker "
                              f"({self._server.get('version')}) to bind its partitions to the exchange")
        from rbench.codec.amqp091 import K
        from rbench.drivers.amqp091 import Amqp091Driver

        amqp = Amqp091Driver()
        try:
            await asyncio.wait_for(amqp.open(ClusterTarget(name="super-stream", uris=self._amqp_uris)), 10)
            await amqp.declare(Topology(exchange=queue.name, exchange_type="direct", exchange_durable=True))
            ch = await amqp.connection.channel()
            for i, part in enumerate(queue.partitions):
                await ch.rpc(K.QUEUE_BIND, (0, part, queue.name, str(i), False, {PARTITION_ORDER: i}),
                             (K.QUEUE_BIND_OK,), f"bind partition {part!r} to {queue.name!r}")
            await ch.close()
        finally:
            await asyncio.wait_for(amqp.aclose(), 5)

    async def delete_super_streams(self, names: list[str], partitions: int) -> None:
        """Delete super streams of ``partitions`` partitions (missing ones are fine): tests' clean-up."""
        for name in names:
            await self.delete_streams([f"{name}-{i}" for i in range(partitions)])
            if self._amqp_uris:
                from rbench.drivers.amqp091 import Amqp091Driver

                amqp = Amqp091Driver()
                await asyncio.wait_for(amqp.open(ClusterTarget(name="super-stream", uris=self._amqp_uris)), 10)
                try:
                    await amqp.delete_exchange(name)
                finally:
                    await asyncio.wait_for(amqp.aclose(), 5)

    async def create_stream(self, queue: QueueDecl) -> bool:
        """Create one stream; True when created, False when it already existed with these arguments.

        The stream protocol answers STREAM_ALREADY_EXISTS whatever the arguments, so an
        existing stream is checked with an AMQP 0.9.1 queue.declare of the same arguments
        (RabbitMQ answers 406 PRECONDITION_FAILED when they differ) when the target has
        AMQP URIs.
        """
        args = create_arguments(queue)
        loc = self._loc()
        props = [schema.Property(k, v) for k, v in args.items()]
        resp: Any = await loc.request(schema.Create(loc.next_corr(), stream=queue.name, arguments=props),
                                 f"create stream {queue.name!r}", ok_codes=(1, 5, 17))
        if resp.response_code == 17:
            raise PreconditionFailed(f"declare stream {queue.name!r}: it already exists with other arguments "
                                     f"(PRECONDITION_FAILED; wanted {args or 'no arguments'}); delete it or "
                                     "declare it as it is", 406)
        if resp.response_code == 1:
            return True
        await self._check_equivalent(queue)
        return False

    async def _check_equivalent(self, queue: QueueDecl) -> None:
        """queue.declare of the same arguments over rbench's own AMQP 0.9.1 driver: 406 when they differ."""
        if not self._amqp_uris:
            log.warning("stream %s exists; no AMQP URI to check its arguments", queue.name)
            return
        from rbench.drivers.amqp091 import Amqp091Driver

        amqp = Amqp091Driver()
        try:
            await asyncio.wait_for(amqp.open(ClusterTarget(name="stream-check", uris=self._amqp_uris)), 10)
            await amqp.queue_declare(queue.name, durable=True, arguments=dict(queue.arguments))
        except PreconditionFailed as exc:
            raise PreconditionFailed(f"declare stream {queue.name!r}: it already exists with other arguments "
                                     f"(PRECONDITION_FAILED: {exc.reply_text or 'inequivalent arguments'})",
                                     406, exc.reply_text) from None
        except (OSError, asyncio.TimeoutError, BrokerError) as exc:
            log.warning("stream %s exists; could not check its arguments over AMQP: %s", queue.name, type(exc).__name__)
        finally:
            try:
                await asyncio.wait_for(amqp.aclose(), 5)
            except Exception:
                pass

    async def messages_ready(self, queue: str) -> int:
        raise ConfigError(f"stream {queue!r}: a stream keeps every message, so it is never empty "
                          "(consumer exit_when: empty is for queues)")

    async def delete_streams(self, names: list[str]) -> None:
        """Delete streams (missing ones are fine): test and scenario clean-up."""
        loc = self._loc()
        for name in names:
            await loc.request(schema.Delete(loc.next_corr(), stream=name), f"delete stream {name!r}",
                              ok_codes=(1, 2))

    async def _leader(self, stream: str) -> tuple[str, int] | None:
        """(host, port) of the stream leader when it is not the node the locator talks to."""
        loc = self._loc()
        resp: Any = await loc.request(schema.Metadata(loc.next_corr(), streams=[stream]), f"metadata of {stream!r}")
        meta = resp.metadata[0]
        if meta.response_code != 1:
            raise response_error(meta.response_code, f"stream {stream!r}")
        brokers = {b.reference: b for b in resp.brokers}
        leader = brokers.get(meta.leader_ref)
        if leader is None:
            raise BrokerError(f"stream {stream!r} has no leader yet")
        here = (self._server.get("advertised_host"), str(self._server.get("advertised_port")))
        if (leader.host, str(leader.port)) == here:
            return None
        return leader.host, leader.port

    async def _connect(self, name: str, host_port: tuple[str, int] | None = None) -> StreamProtocol:
        proto, _ = await open_connection(self._uri, name, host_port=host_port)
        proto.on_lost = self._lost
        self._connections = [c for c in self._connections if c.closed is None]
        self._connections.append(proto)
        return proto

    async def publisher(self, spec: PublisherSpec, sink: PublishSink) -> StreamPublisher | SuperStreamPublisher:
        if spec.filter is not None:
            self._needs(FILTER_SINCE, f"producer {spec.producer_id}: stream filtering")
        if spec.partitions:
            one = partition_spec(spec)
            pubs: list[StreamPublisher] = []
            try:
                for part in spec.partitions:
                    pubs.append(await self._publisher(replace(one, queue=part), sink))
            except BaseException:
                await asyncio.gather(*(p.aclose() for p in pubs), return_exceptions=True)
                raise
            return SuperStreamPublisher(spec.queue, pubs, spec.routing_keys)
        return await self._publisher(spec, sink)

    async def _publisher(self, spec: PublisherSpec, sink: PublishSink) -> StreamPublisher:
        stream = spec.queue or spec.routing_key
        proto = await self._connect(f"rbench-producer-{spec.producer_id}", await self._leader(stream))
        pub = StreamPublisher(proto, stream, spec, sink)
        proto.publishers[0] = pub
        try:
            await proto.request(schema.DeclarePublisher(proto.next_corr(), publisher_id=0, reference="",
                                                        stream=stream), f"declare publisher on {stream!r}")
        except BaseException:
            await proto.close()
            raise
        return pub

    def broker_version(self) -> tuple[int, ...]:
        """RabbitMQ version from the locator's peer properties, e.g. (3, 10, 8); () if unknown."""
        parts = []
        for p in str(self._server.get("version", "")).split("."):
            if not p.isdigit():
                break
            parts.append(int(p))
        return tuple(parts)

    def _needs(self, since: tuple[int, ...], what: str) -> None:
        """BrokerError when the broker is older than ``since`` (an unknown version is let through)."""
        version = self.broker_version()
        if version and version < since:
            raise BrokerError(f"{what} needs RabbitMQ {'.'.join(map(str, since))} or later; this broker is "
                              f"{self._server.get('version')}")

    async def consumer(self, spec: ConsumerSpec, on_message: OnMessage) -> StreamConsumer | SuperStreamConsumer:
        if spec.single_active:
            # 3.10 ignores the property and delivers to every subscriber: refuse rather than mislead
            self._needs(SAC_SINCE, f"consumer {spec.consumer_id}: single active consumer on streams")
        if spec.filter:
            self._needs(FILTER_SINCE, f"consumer {spec.consumer_id}: stream filtering")
        if spec.partitions:
            parts: list[StreamConsumer] = []
            more = {"super-stream": spec.queue} if spec.single_active else {}
            # a runtime that records per queue (ConsumerState.for_queue) gets each partition's deliveries under it
            per_queue = getattr(on_message, "for_queue", None)
            try:
                for part in spec.partitions:
                    parts.append(await self._subscribe(partition_consumer_spec(spec, part),
                                                       per_queue(part) if per_queue else on_message, more))
            except BaseException:
                await asyncio.gather(*(c.aclose() for c in parts), return_exceptions=True)
                raise
            return SuperStreamConsumer(spec.queue, parts)
        return await self._subscribe(spec, on_message, {})

    async def _subscribe(self, spec: ConsumerSpec, on_message: OnMessage, more: dict[str, str]) -> StreamConsumer:
        proto = await self._connect(f"rbench-consumer-{spec.consumer_id}")
        consumer = StreamConsumer(proto, spec, on_message)
        proto.subscribers[0] = consumer
        kind, value = parse_offset(spec.offset)
        properties: dict[str, Any] = {}
        if spec.single_active:
            properties["single-active-consumer"] = "true"
            properties["name"] = str(spec.extra.get("name") or f"rbench-{spec.queue}")
        for i, wanted in enumerate(spec.filter):
            properties[f"filter.{i}"] = wanted
        if spec.filter:
            properties["match-unfiltered"] = "true" if spec.match_unfiltered else "false"
        properties.update(more)
        credit = spec.prefetch if spec.prefetch > 0 else DEFAULT_CREDIT
        try:
            await proto.request(schema.Subscribe(
                proto.next_corr(), subscription_id=0, stream=spec.queue, offset_spec=offset_spec(kind, value),
                credit=min(credit, 65535),
                properties=[schema.Property(k, str(v)) for k, v in properties.items()]),
                f"subscribe to {spec.queue!r}")
        except BaseException:
            await proto.close()
            raise
        return consumer

    async def aclose(self) -> None:
        """Close the locator and any publisher/consumer connection still open (bounded)."""
        self._on_lost = None                       # what closes now is not a loss
        for proto in self._connections:
            if proto.closed is None:
                await proto.close(timeout=1.0)
        self._connections.clear()
        if self._locator is not None:
            await self._locator.close()
            self._locator = None
