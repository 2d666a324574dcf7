"""The fault-injection TCP proxy (tests/proxy.py) against a local echo server: relays, pauses,
delays, cuts, and keeps accepting after a cut."""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.loops import LoopRunner
from tests.proxy import TcpProxy


async def echo_server() -> asyncio.AbstractServer:
    async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(1024):
                w.write(data)
                await w.drain()
        except ConnectionError:
            pass
        w.close()

    return await asyncio.start_server(echo, "127.0.0.1", 0)


def test_proxy_relays_pauses_delays_and_cuts(run: LoopRunner) -> None:
    async def main() -> None:
        server = await echo_server()
        with TcpProxy(("127.0.0.1", server.sockets[0].getsockname()[1])) as proxy:
            r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
            w.write(b"ping")
            assert await asyncio.wait_for(r.readexactly(4), 2) == b"ping"

            proxy.pause()
            w.write(b"held")
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(r.readexactly(4), 0.2)
            proxy.resume()
            assert await asyncio.wait_for(r.readexactly(4), 2) == b"held"

            proxy.latency = 0.05                                # each way: an echo takes ≥ 100 ms
            t0 = time.monotonic()
            w.write(b"slow")
            assert await asyncio.wait_for(r.readexactly(4), 2) == b"slow"
            assert time.monotonic() - t0 >= 0.095
            proxy.latency = 0

            assert proxy.connections == 1 and proxy.forwarded == {"up": 12, "down": 12}
            assert proxy.cut() == 1 and proxy.connections == 0
            try:
                assert await asyncio.wait_for(r.read(), 2) == b""
            except ConnectionError:
                pass                                            # a reset is a cut too

            r2, w2 = await asyncio.open_connection("127.0.0.1", proxy.port)    # still accepting
            w2.write(b"again")
            assert await asyncio.wait_for(r2.readexactly(5), 2) == b"again"
            assert proxy.accepted == 2
            w2.close()
        server.close()

    run(main(), timeout=20)


def test_uri_points_at_the_proxy_and_keeps_the_rest() -> None:
    proxy = TcpProxy(("127.0.0.1", 1))
    proxy.port = 4242
    assert proxy.uri("amqp://u:p@broker:5672/vh?heartbeat=5") == "amqp://u:p@127.0.0.1:4242/vh?heartbeat=5"
    assert proxy.uri("rabbitmq-stream://broker:5552/") == "rabbitmq-stream://127.0.0.1:4242/"
