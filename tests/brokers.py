"""The brokers the tests run against: the system's RabbitMQ 3.10 and RabbitMQ 4.0 (scripts/broker4.sh).

One row per broker, with every endpoint the tests reach it on. `make test` starts both; a test run
without 4.0 (a developer's `pytest tests/unit`, say) skips its 4.0 cells with the command that starts it.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Broker:
    name: str
    version_prefix: str
    amqp_port: int
    stream_port: int
    management_port: int
    prometheus_port: int
    start_with: str

    @property
    def amqp_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    @property
    def stream_url(self) -> str:
        return f"rabbitmq-stream://guest:guest@127.0.0.1:{self.stream_port}/"

    @property
    def management_url(self) -> str:
        return f"http://127.0.0.1:{self.management_port}/api"

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}/metrics"

    def up(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.amqp_port), timeout=2).close()
            return True
        except OSError:
            return False

    def require(self) -> None:
        """Skip (or, under CI, fail) when the broker is not running."""
        if self.up():
            return
        message = f"RabbitMQ {self.version_prefix} is not running on 127.0.0.1:{self.amqp_port}; start it with {self.start_with}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


RABBITMQ_3 = Broker("rabbitmq-3.10", "3.10", 5672, 5552, 15672, 15692, "`make broker`")
RABBITMQ_4 = Broker("rabbitmq-4.0", "4.0", 5680, 5580, 15680, 15780, "`make broker-4` (scripts/broker4.sh)")
BROKERS = (RABBITMQ_3, RABBITMQ_4)
