"""Native amqp091 driver against the real broker: delivery guarantees, returns, flow
control, reply codes and connection errors. Each test uses unique queue names and
deletes what it creates; every wait is bounded."""
from __future__ import annotations

import asyncio
import datetime
import decimal
import struct
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from rbench.codec.amqp091 import K, PublishEncoder, TypedValue
from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, QueueDecl, Topology
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.drivers.amqp091_connect import connect
from rbench.drivers.replies import NotFound, PreconditionFailed
from rbench.errors import BrokerError, ConnectError
from tests.loops import LoopRunner

pytestmark = pytest.mark.timeout(90)
SEQ = struct.Struct("<I")


class Sink:
    def __init__(self) -> None:
        self.acked: list[int] = []
        self.nacked: list[int] = []
        self.returned: list[bytes] = []

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        (self.acked if acked else self.nacked).append(seq)

    def on_return(self, body: Any, t_ns: int) -> None:
        self.returned.append(bytes(body))


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


def test_confirmed_messages_arrive_exactly_once(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    n = 5000

    async def main() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=True),)))
            seen: list[int] = []
            redelivered = []
            cons = await d.consumer(ConsumerSpec(0, unique_name, prefetch=200, multi_ack_every=50),
                                    lambda body, red, t: (seen.append(SEQ.unpack_from(body)[0]), redelivered.append(red)))
            sink = Sink()
            pub = await d.publisher(PublisherSpec(0, unique_name, routing_key=unique_name, confirm=True,
                                                  confirm_window=64, persistent=True), sink)
            buf = bytearray(16)
            max_out = 0
            for seq in range(n):
                await pub.ready()
                max_out = max(max_out, pub.outstanding)
                SEQ.pack_into(buf, 0, seq)
                pub.publish(buf, seq)
            assert await pub.drain(20) == 0
            assert sorted(sink.acked) == list(range(n)) and not sink.nacked
            assert max_out <= 64                      # the window held
            assert await wait_for(lambda: len(seen) >= n, 20)
            await asyncio.sleep(0.2)
            assert sorted(seen) == list(range(n)), "lost or duplicated"
            assert not any(redelivered)
            await cons.aclose()
            await pub.aclose()
            # every delivery was acked: nothing left in the queue
            _, messages, consumers = await d.queue_declare(unique_name, passive=True)
            assert (messages, consumers) == (0, 0)
        finally:
            await d.delete_queues([unique_name])
            await d.aclose()

    run(main())


def test_unroutable_mandatory_messages_are_returned(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    async def main() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=False),)))
            sink = Sink()
            # amq.direct with a key nothing is bound to: every message is unroutable
            pub = await d.publisher(PublisherSpec(0, unique_name, exchange="amq.direct", routing_key=f"{unique_name}-nobody",
                                                  confirm=True, confirm_window=50, mandatory=True), sink)
            ok = await d.publisher(PublisherSpec(1, unique_name, routing_key=unique_name, confirm=True, mandatory=True),
                                   Sink())
            for seq in range(100):
                await pub.ready()
                pub.publish(SEQ.pack(seq) + b"pad", seq)
                ok.publish(SEQ.pack(seq), seq)
            assert await pub.drain(10) == 0 and await ok.drain(10) == 0
            assert len(sink.returned) == 100 and pub.returned == 100 and ok.returned == 0
            assert sorted(SEQ.unpack_from(b)[0] for b in sink.returned) == list(range(100))
            assert sorted(sink.acked) == list(range(100))   # a returned message is still acked
            _, messages, _ = await d.queue_declare(unique_name, passive=True)
            assert messages == 100
        finally:
            await d.delete_queues([unique_name])
            await d.aclose()

    run(main())


def _watermark(value: str) -> None:
    subprocess.run(["rabbitmqctl", "set_vm_memory_high_watermark", value], check=True, capture_output=True, timeout=30)


@pytest.mark.loops("uvloop")
def test_blocked_connection_pauses_publishing(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    """Runs on uvloop only: ~5 s of rabbitmqctl, and it blocks every publisher on the shared broker."""
    async def main() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=False),)))
            sink = Sink()
            pub = await d.publisher(PublisherSpec(0, unique_name, routing_key=unique_name, confirm=True,
                                                  confirm_window=10), sink)
            try:
                await asyncio.to_thread(_watermark, "0.0000001")
                # the broker blocks a connection when it next publishes
                for seq in range(5):            # publish() never waits, so this cannot hang
                    pub.publish(SEQ.pack(seq), seq)
                    await asyncio.sleep(0.05)
                assert await wait_for(lambda: d.connection.blocked, 15), "no connection.blocked"
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(pub.ready(), 1.0)
            finally:
                await asyncio.to_thread(_watermark, "0.4")
            assert await wait_for(lambda: not d.connection.blocked, 15), "no connection.unblocked"
            await asyncio.wait_for(pub.ready(), 5)
            pub.publish(SEQ.pack(5), 5)
            assert await pub.drain(10) == 0
            assert sorted(sink.acked) == list(range(6))
        finally:
            await d.delete_queues([unique_name])
            await d.aclose()

    try:
        run(main())
    finally:
        _watermark("0.4")


def test_channel_close_surfaces_reply_codes(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    async def main() -> None:
        d = await opened(amqp_url)
        try:
            with pytest.raises(NotFound) as missing:
                await d.queue_declare(f"{unique_name}-missing", passive=True)
            assert missing.value.reply_code == 404 and "NOT_FOUND" in str(missing.value)
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=True, arguments=(("x-max-length", 10),)),)))
            with pytest.raises(PreconditionFailed) as differs:
                await d.declare(Topology(queues=(QueueDecl(unique_name, durable=True, arguments=(("x-max-length", 20),)),)))
            assert differs.value.reply_code == 406 and isinstance(differs.value, BrokerError)
            assert unique_name in str(differs.value)
            # the connection survives channel errors
            with pytest.raises(NotFound):
                await d.consumer(ConsumerSpec(0, f"{unique_name}-missing"), lambda *a: None)
            assert (await d.queue_declare(unique_name, passive=True))[0] == unique_name
        finally:
            await d.delete_queues([unique_name])
            await d.aclose()

    run(main())


def _bad(url: str, *, password: str | None = None, vhost: str | None = None) -> str:
    from urllib.parse import urlsplit
    p = urlsplit(url)
    auth = f"{p.username}:{password if password is not None else p.password}"
    return f"amqp://{auth}@{p.hostname}:{p.port or 5672}/{vhost if vhost is not None else p.path.lstrip('/')}"


@pytest.mark.parametrize("case", ["password", "vhost", "refused"])
def test_connect_errors_are_clear_fast_and_masked(amqp_url: str, case: str, run: LoopRunner) -> None:
    secret = "s3cret-Pa55"
    uri = {"password": _bad(amqp_url, password=secret),
           "vhost": _bad(amqp_url, vhost="rbench-no-such-vhost"),
           "refused": f"amqp://guest:{secret}@127.0.0.1:1/"}[case]
    expect = {"password": "authentication refused", "vhost": "vhost 'rbench-no-such-vhost' refused",
              "refused": "refused"}[case]

    async def main() -> None:
        t0 = time.monotonic()
        with pytest.raises(ConnectError) as err:
            await connect([uri])
        assert time.monotonic() - t0 < 10
        msg = str(err.value)
        assert expect in msg.lower() or expect in msg
        assert secret not in msg
        if case != "vhost":
            assert "***" in msg

    run(main())


def test_failover_to_the_next_uri(amqp_url: str, run: LoopRunner) -> None:
    async def main() -> None:
        conn = await connect(["amqp://guest:guest@127.0.0.1:1/", amqp_url])
        assert conn.server_properties.get("product") == "RabbitMQ"
        await conn.close()

    run(main())


def test_large_bodies_headers_and_processing_delay(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    """Bodies above frame_max are split and reassembled; every field type survives the broker;
    processing delay is sequential and every message ends up acked."""
    headers = {"t": True, "b": -5, "s": -300, "I": -70000, "l": -(2**40), "d": 2.5, "S": "héllo", "x": b"\x00\xff",
               "A": [1, "a"], "T": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc),
               "D": decimal.Decimal("1.25"), "F": {"n": {"k": "v"}}, "V": None,
               "B": TypedValue("B", 200), "u": TypedValue("u", 60000), "i": TypedValue("i", 4_000_000_000),
               "f": TypedValue("f", 0.5)}

    async def main() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=False),)))
            conn = d.connection
            ch = await conn.channel()
            big = bytes(range(256)) * 1200          # 300 KB > frame_max 128 KB
            enc = PublishEncoder(ch.number, "", unique_name, False, {"headers": headers, "delivery_mode": 1},
                                 conn.frame_max)
            enc.write(conn.out, big)
            conn.flush()
            for _ in range(50):
                key, got = await ch.rpc(K.BASIC_GET, (0, unique_name, True), (K.BASIC_GET_OK, K.BASIC_GET_EMPTY))
                if key == K.BASIC_GET_OK:
                    break
                await asyncio.sleep(0.05)
            assert key == K.BASIC_GET_OK
            _args, props, body = got
            assert body == big
            want = {k: (v.value if isinstance(v, TypedValue) else v) for k, v in headers.items()}
            assert props["headers"] == want
            await ch.close()

            got_at: list[int] = []
            cons = await d.consumer(ConsumerSpec(0, unique_name, prefetch=50, multi_ack_every=7,
                                                 processing_delay_us=2000), lambda b, r, t: got_at.append(t))
            pub = await d.publisher(PublisherSpec(0, unique_name, routing_key=unique_name), Sink())
            t0 = time.monotonic()
            for seq in range(100):
                pub.publish(big[:10], seq)
            assert await wait_for(lambda: len(got_at) == 100, 10)
            # 100 messages × 2 ms of sequential work before the last ack
            assert await wait_for(lambda: d.connection.channels and cons._acked_tag == 100, 10)
            assert time.monotonic() - t0 >= 0.19
            await cons.aclose()
            await pub.aclose()
            assert (await d.queue_declare(unique_name, passive=True))[1] == 0
        finally:
            await d.delete_queues([unique_name])
            await d.aclose()

    run(main())


def test_auto_ack_nack_and_reject(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    async def main() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=False),)))
            pub = await d.publisher(PublisherSpec(0, unique_name, routing_key=unique_name, confirm=True), Sink())
            for seq in range(20):
                pub.publish(SEQ.pack(seq), seq)
            assert await pub.drain(5) == 0
            got: list[bool] = []
            cons = await d.consumer(ConsumerSpec(0, unique_name, auto_ack=True), lambda b, r, t: got.append(r))
            assert await wait_for(lambda: len(got) == 20, 5)
            await cons.aclose()
            assert (await d.queue_declare(unique_name, passive=True))[1] == 0
            # manual consumer that nacks with requeue: the broker redelivers with redelivered=true
            for seq in range(3):
                pub.publish(SEQ.pack(seq), seq)
            assert await pub.drain(5) == 0
            flags: list[bool] = []
            cons = await d.consumer(ConsumerSpec(1, unique_name, prefetch=3, multi_ack_every=1000),
                                    lambda b, r, t: flags.append(r))
            assert await wait_for(lambda: len(flags) == 3, 5)
            cons.nack(3, multiple=True, requeue=True)
            d.connection.flush()
            assert await wait_for(lambda: len(flags) == 6, 5)
            assert flags == [False] * 3 + [True] * 3
            cons.reject(4, requeue=False)
            cons.reject(5, requeue=False)
            cons.reject(6, requeue=False)
            d.connection.flush()
            cons._last_tag = cons._acked_tag = 6      # nothing left to ack on close
            await cons.aclose()
            await pub.aclose()
            assert (await d.queue_declare(unique_name, passive=True))[1] == 0
        finally:
            await d.delete_queues([unique_name])
            await d.aclose()

    run(main())


def test_exchange_binding_with_arguments_routes(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    exchange = f"{unique_name}-x"

    async def main() -> None:
        d = await opened(amqp_url)
        try:
            await d.declare(Topology(exchange=exchange, exchange_type="topic", exchange_durable=False,
                                     queues=(QueueDecl(unique_name, durable=False, arguments=(("x-max-length", 1000),
                                                                                             ("x-queue-mode", "default"))),),
                                     bindings=((unique_name, "a.*"),)))
            sink = Sink()
            pub = await d.publisher(PublisherSpec(0, unique_name, exchange=exchange, routing_key="a.b", confirm=True,
                                                  mandatory=True), sink)
            miss = await d.publisher(PublisherSpec(1, unique_name, exchange=exchange, routing_key="b.a", confirm=True,
                                                   mandatory=True), sink)
            for seq in range(10):
                pub.publish(SEQ.pack(seq), seq)
                miss.publish(SEQ.pack(seq), 100 + seq)
            assert await pub.drain(5) == 0 and await miss.drain(5) == 0
            assert len(sink.returned) == 10 and len(sink.acked) == 20
            assert (await d.queue_declare(unique_name, passive=True))[1] == 10
        finally:
            await d.delete_queues([unique_name])
            await d.delete_exchange(exchange)
            await d.aclose()

    run(main())


def test_amqps_to_a_plain_port_fails_clearly(amqp_url: str, run: LoopRunner) -> None:
    from urllib.parse import urlsplit
    p = urlsplit(amqp_url)
    uri = f"amqps://{p.username}:{p.password}@{p.hostname}:{p.port or 5672}/?verify=verify_none"

    async def main() -> None:
        t0 = time.monotonic()
        with pytest.raises(ConnectError) as err:
            await connect([uri], timeout=6)
        assert time.monotonic() - t0 < 10
        msg = str(err.value)
        assert "amqps://" in msg and "TLS failed" in msg and f":{p.password}@" not in msg and "***" in msg

    run(main())
