"""Super streams (partitioned streams) on the stream driver: routing, and one publisher or consumer over the partitions.

A super stream NAME is P partition streams NAME-0 … NAME-(P-1) bound to a direct exchange NAME with binding keys
"0" … "P-1" (argument ``x-stream-partition-order``), the layout RabbitMQ's ``CreateSuperStream`` (3.13+) and
``rabbitmq-streams add_super_stream`` make. The driver declares it with that command where the broker has it, and as
streams plus AMQP 0.9.1 bindings on older brokers (3.10 has neither the command nor super stream metadata).

Routing is client-side, as RabbitMQ's Java stream client hashes: the 32-bit murmur3 (x86 variant, seed 104729) of
the routing key's UTF-8 bytes, taken unsigned, modulo the number of partitions, indexes the partitions in their
order. Message n of a producer has the routing key str(n mod routing_keys); the key → partition table is built once.
"""
from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from typing import Any

from rbench.config.types import ConsumerSpec, PublisherSpec
from rbench.drivers.base import cannot_pause
from rbench.errors import BrokerError

HASH_SEED = 104729            # the Java stream client's seed for super stream hash routing
PARTITION_ORDER = "x-stream-partition-order"


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data``, unsigned."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & mask
    n = len(data)
    whole = n - n % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    tail = data[whole:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h


def partition_of(routing_key: str, partitions: int) -> int:
    """The partition (index in partition order) a message with ``routing_key`` goes to."""
    return murmur3_32(routing_key.encode(), HASH_SEED) % partitions


def route_table(routing_keys: int, partitions: int) -> tuple[int, ...]:
    """Key n (routing key str(n)) → its partition, for n in [0, routing_keys)."""
    return tuple(partition_of(str(n), partitions) for n in range(routing_keys))


def partition_spec(spec: PublisherSpec) -> PublisherSpec:
    """A partition publisher's spec: the producer's confirm window shared out over the partitions."""
    window = math.ceil(spec.confirm_window / len(spec.partitions)) if spec.confirm_window > 0 else 0
    return replace(spec, confirm_window=window, partitions=())


class SuperStreamPublisher:
    """One producer over every partition: a StreamPublisher (its own connection, to the partition's leader) each;
    ``publish`` sends message ``seq`` to the partition its routing key hashes to. Confirms reach the one sink
    under the message's seq whichever partition confirmed it."""

    def __init__(self, stream: str, publishers: list[Any], routing_keys: int) -> None:
        self.stream = stream
        self._pubs = publishers
        self._keys = routing_keys
        self._route = route_table(routing_keys, len(publishers))

    def publish(self, payload: bytes | bytearray | memoryview, seq: int) -> None:
        self._pubs[self._route[seq % self._keys]].publish(payload, seq)

    @property
    def error(self) -> BrokerError | None:
        return next((p.error for p in self._pubs if p.error is not None), None)

    @property
    def outstanding(self) -> int:
        return sum(int(p.outstanding) for p in self._pubs)

    async def ready(self) -> None:
        for p in self._pubs:
            await p.ready()

    def can_publish(self) -> bool:
        return all(p.can_publish() for p in self._pubs)

    async def drain(self, timeout: float) -> int:
        left = await asyncio.gather(*(p.drain(timeout) for p in self._pubs))
        return sum(left)

    async def aclose(self) -> None:
        await asyncio.gather(*(p.aclose() for p in self._pubs), return_exceptions=True)


def partition_consumer_spec(spec: ConsumerSpec, partition: str) -> ConsumerSpec:
    """One partition's subscription: the partition as queue, the super stream's group name for single active
    consumer (offsets are stored per partition under it), and where a reconnect resumes on this partition."""
    extra = dict(spec.extra)
    resume = extra.pop("partition_offsets", {}).get(partition)
    if spec.single_active:
        extra["name"] = str(spec.extra.get("name") or f"rbench-{spec.queue}")
    return replace(spec, queue=partition, partitions=(), extra=extra,
                   offset=spec.offset if resume is None else f"offset:{resume}")


class SuperStreamConsumer:
    """One consumer over every partition (a StreamConsumer each); with single active consumer the broker picks, per
    partition, one active member among the consumers of the group (the ``super-stream`` subscription property)."""

    pausable = False

    def __init__(self, stream: str, consumers: list[Any]) -> None:
        self.stream = stream
        self.parts = consumers

    @property
    def filtered(self) -> int:
        return sum(int(c.filtered) for c in self.parts)

    @property
    def malformed(self) -> int:
        return sum(int(c.malformed) for c in self.parts)

    @property
    def error(self) -> BrokerError | None:
        return next((c.error for c in self.parts if c.error is not None), None)

    async def pause(self) -> None:
        raise cannot_pause("stream")

    async def resume(self) -> None:
        raise cannot_pause("stream")

    def resume_spec(self, spec: ConsumerSpec) -> ConsumerSpec:
        """After a lost connection: each partition from the first offset it had not handled."""
        offsets = {c.stream: c.next_offset for c in self.parts if c.next_offset is not None}
        return replace(spec, extra={**spec.extra, "partition_offsets": offsets}) if offsets else spec

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self.parts), return_exceptions=True)
