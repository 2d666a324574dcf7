"""amqps:// end to end: the native driver through a TLS terminator in front of the real broker.

The shared broker has no TLS listener, so the test puts one in front of it: an asyncio
TLS server on loopback with a freshly made CA and server certificate, relaying bytes
to 127.0.0.1:5672. The driver must verify the chain (cacertfile=…) and the host name.
"""
from __future__ import annotations

import asyncio
import ssl
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, QueueDecl, Topology
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.errors import ConnectError
from tests.loops import LoopRunner


def make_certs(folder: Path) -> tuple[Path, Path, Path]:
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=rbench-test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
        "-extfile", "san.cnf", "-out", "server.pem")
    return folder / "ca.pem", folder / "server.pem", folder / "server.key"


async def tls_relay(cert: Path, key: Path, target: tuple[str, int]) -> asyncio.AbstractServer:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        broker_r, broker_w = await asyncio.open_connection(*target)
        await asyncio.gather(pipe(client_r, broker_w), pipe(broker_r, client_w))

    return await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)


class Sink:
    def __init__(self) -> None:
        self.acked: list[int] = []

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        self.acked.append(seq)

    def on_return(self, body: object, t_ns: int) -> None:
        pass


def test_amqps_publish_and_consume_through_tls(amqp_url: str, unique_name: str, tmp_path: Path, run: LoopRunner) -> None:
    ca, cert, key = make_certs(tmp_path)
    broker = urlsplit(amqp_url)

    async def main() -> tuple[list[int], list[bytes]]:
        server = await tls_relay(cert, key, (broker.hostname or "127.0.0.1", broker.port or 5672))
        port = server.sockets[0].getsockname()[1]
        uri = f"amqps://guest:guest@127.0.0.1:{port}/?cacertfile={ca}"
        driver = Amqp091Driver()
        received: list[bytes] = []
        try:
            await driver.open(ClusterTarget(name="tls", uris=(uri,)))
            await driver.declare(Topology(queues=(QueueDecl(unique_name, durable=False, auto_delete=True),)))
            consumer = await driver.consumer(ConsumerSpec(consumer_id=0, queue=unique_name, prefetch=50),
                                             lambda body, redelivered, t: received.append(bytes(body)))
            sink = Sink()
            pub = await driver.publisher(PublisherSpec(producer_id=0, queue=unique_name, routing_key=unique_name,
                                                       confirm=True, confirm_window=20), sink)
            for seq in range(100):
                await pub.ready()
                pub.publish(b"tls-%03d" % seq, seq)
            assert await pub.drain(10) == 0
            deadline = time.monotonic() + 10
            while len(received) < 100 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await consumer.aclose()
            await pub.aclose()
            return sorted(sink.acked), received
        finally:
            await driver.aclose()
            server.close()

    acked, received = run(main())
    assert acked == list(range(100))
    assert received == [b"tls-%03d" % i for i in range(100)]


def test_amqps_refuses_an_unknown_certificate_authority(amqp_url: str, tmp_path: Path, run: LoopRunner) -> None:
    _, cert, key = make_certs(tmp_path)
    broker = urlsplit(amqp_url)

    async def main() -> None:
        server = await tls_relay(cert, key, (broker.hostname or "127.0.0.1", broker.port or 5672))
        port = server.sockets[0].getsockname()[1]
        try:
            driver = Amqp091Driver()
            await driver.open(ClusterTarget(name="tls", uris=(f"amqps://guest:secret-pw@127.0.0.1:{port}/",)))
        finally:
            server.close()

    with pytest.raises(ConnectError) as info:
        run(main())
    assert "certificate" in str(info.value).lower() and "secret-pw" not in str(info.value)
