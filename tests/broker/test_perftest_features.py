"""What `rbench perftest` options turn on, done for real against the broker.

The amqp091 driver: message properties, random routing keys, transactions, global qos,
consumer rate, nack; the runtime: exit-when, delayed consumers, varying bodies.
"""
from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from rbench.codec.amqp091 import K
from rbench.config.load import workload_from_dict
from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, QueueDecl, Topology
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.errors import BrokerError
from rbench.perftest import grammar, mapping
from rbench.plan import plan
from rbench.runtime.task import run_task
from tests.runhelpers import read

pytestmark = pytest.mark.timeout(120)
SEQ = struct.Struct("<I")


class Sink:
    def __init__(self) -> None:
        self.acked: list[int] = []

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        self.acked.append(seq)

    def on_return(self, body: Any, t_ns: int) -> None:
        pass


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return uvloop.run(coro_fn())


async def opened(url: str) -> Amqp091Driver:
    d = Amqp091Driver()
    await d.open(ClusterTarget("test", (url,)))
    return d


async def wait_for(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        await asyncio.sleep(0.01)
    return cond()


async def get_all(d: Amqp091Driver, queue: str, n: int) -> list[tuple[Any, dict[str, Any], bytes]]:
    ch = await d.connection.channel()
    out = []
    try:
        deadline = time.monotonic() + 10
        while len(out) < n and time.monotonic() < deadline:
            key, got = await ch.rpc(K.BASIC_GET, (0, queue, True), (K.BASIC_GET_OK, K.BASIC_GET_EMPTY))
            if key == K.BASIC_GET_OK:
                out.append(got)
            else:
                await asyncio.sleep(0.02)
    finally:
        await ch.close()
    return out


def test_properties_content_type_and_random_routing_keys(amqp_url: str, unique_name: str) -> None:
    """-mp, -T, -K and -rkcs: properties arrive as set; keys are random per message or cycle a cache."""
    exchange = f"{unique_name}-x"
    props = (("headers", {"tenant": "t1"}), ("priority", 5), ("app_id", "perf"))

    async def main() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(exchange=exchange, exchange_type="topic", exchange_durable=False,
                                     queues=(QueueDecl(unique_name, durable=False),), bindings=((unique_name, "#"),)))
            fresh = await d.publisher(PublisherSpec(0, unique_name, exchange=exchange, routing_key="fixed", confirm=True,
                                                    content_type="text/plain", properties=props,
                                                    random_routing_key=True), Sink())
            cached = await d.publisher(PublisherSpec(1, unique_name, exchange=exchange, routing_key="fixed",
                                                     confirm=True, random_routing_key=True, routing_key_cache=3), Sink())
            for seq in range(6):
                fresh.publish(SEQ.pack(seq), seq)
            assert await fresh.drain(5) == 0
            got = await get_all(d, unique_name, 6)
            keys = {args[3] for args, _, _ in got}
            assert len(got) == 6 and len(keys) == 6 and "fixed" not in keys
            _, p, _ = got[0]
            assert p["content_type"] == "text/plain" and p["priority"] == 5 and p["app_id"] == "perf"
            assert p["headers"] == {"tenant": "t1"}
            for seq in range(9):
                cached.publish(SEQ.pack(seq), seq)
            assert await cached.drain(5) == 0
            got = await get_all(d, unique_name, 9)
            keys9 = [args[3] for args, _, _ in got]
            assert len(set(keys9)) == 3 and keys9[:3] == keys9[3:6] == keys9[6:]
            await fresh.aclose()
            await cached.aclose()
        finally:
            await d.delete_queues([unique_name])
            await d.delete_exchange(exchange)
            await d.aclose()

    run(main)


def test_an_exchange_type_the_broker_lacks_is_a_clear_error(amqp_url: str, unique_name: str) -> None:
    """-t x-consistent-hash goes to the broker as is; this broker has no such plugin and says so."""
    async def main() -> None:
        d = await opened(amqp_url)
        try:
            with pytest.raises(BrokerError, match="503 COMMAND_INVALID - unknown exchange type 'x-consistent-hash'"):
                await d.declare(Topology(exchange=f"{unique_name}-x", exchange_type="x-consistent-hash",
                                         exchange_durable=False))
        finally:
            await d.aclose()

    run(main)


def test_publisher_and_consumer_transactions(amqp_url: str, unique_name: str) -> None:
    """-m 10: only committed batches reach the queue until the drain commits the rest; -n 4 commits acks."""
    async def main() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=False),)))
            pub = await d.publisher(PublisherSpec(0, unique_name, routing_key=unique_name, tx_size=10), Sink())
            for seq in range(25):
                await pub.ready()
                pub.publish(SEQ.pack(seq), seq)
            d.connection.flush()
            await asyncio.sleep(0.3)
            assert (await d.queue_declare(unique_name, passive=True))[1] == 20       # two commits of 10
            await pub.drain(5)
            assert await wait_for(lambda: True, 0.1)
            assert (await d.queue_declare(unique_name, passive=True))[1] == 25
            await pub.aclose()
            got: list[bool] = []
            cons = await d.consumer(ConsumerSpec(0, unique_name, prefetch=10, tx_size=4), lambda b, r, t: got.append(r))
            assert await wait_for(lambda: len(got) == 25, 10)
            await asyncio.sleep(0.2)
            await cons.aclose()
            await asyncio.sleep(0.2)
            # every ack was committed (the last partial batch on close): nothing requeued
            assert (await d.queue_declare(unique_name, passive=True))[1] == 0
            assert not any(got)
        finally:
            await d.delete_queues([unique_name])
            await d.aclose()

    run(main)


def test_nack_global_qos_and_consumer_rate(amqp_url: str, unique_name: str) -> None:
    """-na -re false drops every message; -na requeues; -Q 2 holds two unacked; -R 20 paces to 20/s."""
    async def main() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=False),)))
            pub = await d.publisher(PublisherSpec(0, unique_name, routing_key=unique_name, confirm=True), Sink())

            async def fill(n: int) -> None:
                for seq in range(n):
                    pub.publish(SEQ.pack(seq), seq)
                assert await pub.drain(5) == 0

            await fill(10)
            flags: list[bool] = []
            cons = await d.consumer(ConsumerSpec(0, unique_name, prefetch=10, nack=True, requeue=False),
                                    lambda b, r, t: flags.append(r))
            assert await wait_for(lambda: len(flags) == 10, 5)
            await cons.aclose()
            assert (await d.queue_declare(unique_name, passive=True))[1] == 0      # dropped, not requeued

            await fill(5)
            flags = []
            cons = await d.consumer(ConsumerSpec(1, unique_name, prefetch=5, nack=True),
                                    lambda b, r, t: flags.append(r))
            assert await wait_for(lambda: len(flags) >= 15, 5)                    # the same 5, again and again
            assert flags[:5] == [False] * 5 and any(flags[5:])
            await cons.aclose()
            await d.delete_queues([unique_name])
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=False),)))

            await fill(20)
            seen: list[int] = []
            t0 = time.monotonic()
            cons = await d.consumer(ConsumerSpec(2, unique_name, global_prefetch=2, rate=20),
                                    lambda b, r, t: seen.append(t))
            await asyncio.sleep(0.03)
            # two in flight (global prefetch 2); the next only 50 ms (1/20 s) after the first, when it is acked
            assert 1 <= len(seen) <= 3
            assert await wait_for(lambda: len(seen) == 20, 10)
            elapsed = time.monotonic() - t0
            assert elapsed >= 0.85                 # 20 messages finished at most 20/s
            await cons.aclose()
            await pub.aclose()
        finally:
            await d.delete_queues([unique_name])
            await d.aclose()

    run(main)


def perftest_workload(tokens: list[str]) -> Any:
    return workload_from_dict(mapping.to_workload(grammar.parse(tokens)).workload)


@pytest.mark.parametrize("mode", ["idle", "empty"])
def test_exit_when_ends_a_consumers_only_run(mode: str, amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    """-x 0 -ew idle|empty with no -z: the consumers drain a filled queue and the task ends on its own."""
    async def fill() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=False),)))
            pub = await d.publisher(PublisherSpec(0, unique_name, routing_key=unique_name, confirm=True), Sink())
            for seq in range(300):
                pub.publish(SEQ.pack(seq), seq)
            assert await pub.drain(5) == 0
            await pub.aclose()
        finally:
            await d.aclose()

    run(fill)
    try:
        w = perftest_workload(["-h", amqp_url, "-x", "0", "-y", "2", "-u", unique_name, "-ad", "false", "-p",
                               "-q", "50", "-ew", mode])
        (p,) = plan(w, "default", 1, "run", str(tmp_path))
        started = time.monotonic()
        result = run_task(p)
        assert time.monotonic() - started < 15
        assert result["consumed"] == 0        # the bodies carry no stamp, so nothing is recorded …

        async def left() -> int:
            d = await opened(amqp_url)
            try:
                return (await d.queue_declare(unique_name, passive=True))[1]
            finally:
                await d.aclose()

        assert run(left) == 0                 # … but every message was taken and acked
    finally:
        async def delete() -> None:
            d = await opened(amqp_url)
            await d.delete_queues([unique_name])
            await d.aclose()
        run(delete)


def test_delayed_consumers_json_bodies_and_variable_sizes(amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    """-csd 1: nothing is received in the first second; --json-body bodies are -s bytes; -vs cycles sizes."""
    w = perftest_workload(["-h", amqp_url, "-u", unique_name, "-x", "1", "-y", "1", "-r", "100", "-prsd", "0",
                           "-z", "3", "-csd", "1", "-jb", "-s", "300", "-bc", "5", "-st", "5"])
    (p,) = plan(w, "default", 1, "run", str(tmp_path / "a"))
    assert len(p.bodies) == 5 and {len(b) for b in p.bodies} == {300}
    result = run_task(p)
    published, consumed = read(tmp_path / "a" / "run", "published"), read(tmp_path / "a" / "run", "consumed")
    assert set(published["size"].to_pylist()) == {300}
    assert consumed.num_rows == published.num_rows == result["published"]
    t0 = result["t0_ns"]
    assert min(consumed["t_received"].to_pylist()) >= t0 + 0.95e9      # subscribed one second after t0

    w = perftest_workload(["-h", amqp_url, "-u", unique_name, "-x", "1", "-y", "1", "-r", "100", "-prsd", "0",
                           "-z", "2", "-vs", "100:1", "-vs", "2000:1", "-st", "5"])
    (p,) = plan(w, "default", 1, "run", str(tmp_path / "b"))
    result = run_task(p)
    published = read(tmp_path / "b" / "run", "published")
    t0 = result["t0_ns"]
    by_half = {(ti - t0) // 10**9: s for ti, s in zip(published["t_intended"].to_pylist(), published["size"].to_pylist())}
    assert by_half == {0: 100, 1: 2000}


def test_stream_queue_over_amqp091_from_the_first_offset(amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    """-sq: a stream, reached over AMQP 0-9-1 as PerfTest does, read from -sco first."""
    w = perftest_workload(["-h", amqp_url, "-u", unique_name, "-x", "1", "-y", "1", "-r", "100", "-prsd", "0",
                           "-z", "2", "-sq", "-sco", "first", "-c", "20", "-st", "5"])
    assert w.resolved_driver() == "amqp091"
    (p,) = plan(w, "default", 1, "run", str(tmp_path))
    assert dict(p.topology.queues[0].arguments)["x-queue-type"] == "stream"
    try:
        result = run_task(p)
        assert result["published"] == result["consumed"] == pytest.approx(200, abs=10)
    finally:
        async def delete() -> None:
            d = await opened(amqp_url)
            await d.delete_queues([unique_name])
            await d.aclose()
        run(delete)


def test_servers_startup_timeout_retries_then_fails_clearly(unique_name: str) -> None:
    """-sst 2: a broker that refuses connections is retried for 2 s, then one line says so."""
    from rbench.coordinator.run import probe_clusters
    from rbench.errors import ConnectError

    w = perftest_workload(["-h", "amqp://guest:guest@127.0.0.1:5679/", "-u", unique_name, "-z", "1", "-sst", "2"])
    started = time.monotonic()
    with pytest.raises(ConnectError, match=r"cluster default: cannot connect .*\(retried for 2 s\)"):
        probe_clusters(w)
    assert 1.9 <= time.monotonic() - started < 8
