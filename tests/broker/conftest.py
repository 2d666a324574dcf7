"""Broker-tier fixtures: TCP proxies in front of the broker's AMQP and stream ports."""
from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest

from tests.proxy import MakeProxy, TcpProxy, host_port


@pytest.fixture
def tcp_proxy() -> Iterator[MakeProxy]:
    """``tcp_proxy((host, port), ssl=None)`` → a started TcpProxy; every one is closed after the test."""
    made: list[TcpProxy] = []

    def make(upstream: tuple[str, int], ssl: ssl.SSLContext | None = None) -> TcpProxy:
        proxy = TcpProxy(upstream, ssl=ssl).start()
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


@pytest.fixture
def amqp_proxy(tcp_proxy: MakeProxy, amqp_url: str) -> TcpProxy:
    """A proxy in front of the broker's AMQP port (5672): ``amqp_proxy.uri(amqp_url)`` goes through it."""
    return tcp_proxy(host_port(amqp_url, 5672))


@pytest.fixture
def stream_proxy(tcp_proxy: MakeProxy, stream_url: str) -> TcpProxy:
    """A proxy in front of the broker's stream port (5552)."""
    return tcp_proxy(host_port(stream_url, 5552))
