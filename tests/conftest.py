"""Fixtures shared by every test tier.

Broker tests talk to the real RabbitMQ on 127.0.0.1 (RBENCH_AMQP_URL overrides);
Spark tests share one local[2] session because each start costs ~20 s here.
"""
from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

AMQP_URL = os.environ.get("RBENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
STREAM_URL = os.environ.get("RBENCH_STREAM_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/")


@pytest.fixture(scope="session")
def amqp_url() -> str:
    return AMQP_URL


@pytest.fixture(scope="session")
def stream_url() -> str:
    return STREAM_URL


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A queue/stream name no other test (or earlier run) uses."""
    return f"rbench-test-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark() -> Iterator["object"]:
    from rbench.sparkglue import local_session

    session = local_session("local[2]", app_name="rbench-tests")
    yield session
    session.stop()
