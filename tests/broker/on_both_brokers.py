"""Fixtures for a test module that runs on both brokers of tests/brokers.py: import them into the module.

Its ``amqp_url`` and ``stream_url`` are the broker row's, never a stream port derived from an AMQP one (4.0's
AMQP 5680 has its streams on 5580, not 5552)."""
from __future__ import annotations

import pytest

from tests.brokers import Broker


@pytest.fixture
def amqp_url(broker: Broker) -> str:
    return broker.amqp_url


@pytest.fixture
def stream_url(broker: Broker) -> str:
    return broker.stream_url
