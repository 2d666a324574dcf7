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

from tests.brokers import BROKERS, Broker
from tests.cluster_fixture import rabbit_cluster  # noqa: F401  (the session fixture of tests marked cluster)
from tests.loops import LOOP_KINDS, LoopRunner

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

AMQP_URL = os.environ.get("RBENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
# Every name this pytest session declares starts with TEST_PREFIX, and only those are deleted at the
# end: two suites sharing one broker (CI and a developer, or two work trees) never drop each other's queues.
TEST_PREFIX = f"rbench-test-{uuid.uuid4().hex[:6]}-"
STREAM_URL = os.environ.get("RBENCH_STREAM_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/")


@pytest.fixture(params=BROKERS, ids=lambda b: b.name)
def broker(request: pytest.FixtureRequest) -> Broker:
    """Each broker of tests/brokers.py (RabbitMQ 3.10 and 4.0), for the tests that run on both."""
    b: Broker = request.param
    b.require()
    return b


@pytest.fixture(scope="session")
def amqp_url() -> str:
    return AMQP_URL


@pytest.fixture(scope="session")
def stream_url() -> str:
    return STREAM_URL


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A queue/stream name no other test (or earlier run) uses."""
    return f"{TEST_PREFIX}{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "loops(*kinds): run this test's `run` fixture on these loop kinds only")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``cluster`` run last: the 3-node cluster they share starts once, and its three Erlang
    VMs (about 10 % of a core each, idle) do not run beside every other test of the session."""
    items.sort(key=lambda item: item.get_closest_marker("cluster") is not None)    # stable: order kept otherwise


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test using `run` runs once per event loop kind (tests/loops.py)."""
    if "loop_kind" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("loops")
        metafunc.parametrize("loop_kind", marker.args if marker else LOOP_KINDS)


@pytest.fixture
def run(loop_kind: str) -> LoopRunner:
    """`run(coro, timeout=None)`: run a coroutine on a fresh asyncio or uvloop loop (parametrized)."""
    return LoopRunner(loop_kind)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from rbench.spark import local_session

    session = local_session("local[2]", app_name="rbench-tests")
    if session.sparkContext.master != "local[2]":
        # an earlier in-process `rbench … --master local[1]` left its session behind, and getOrCreate returns it
        session.stop()
        session = local_session("local[2]", app_name="rbench-tests")
    assert session.sparkContext.master == "local[2]", session.sparkContext.master
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def _delete_test_queues_afterwards() -> Iterator[None]:
    """Leave the shared broker as we found it: drop every queue this session created (TEST_PREFIX*)."""
    yield
    import base64
    import json as _json
    import urllib.parse
    import urllib.request

    api = os.environ.get("RBENCH_MANAGEMENT_URL", "http://127.0.0.1:15672/api")
    auth = "Basic " + base64.b64encode(b"guest:guest").decode()
    try:
        request = urllib.request.Request(f"{api}/queues?columns=name,vhost", headers={"Authorization": auth})
        queues = _json.loads(urllib.request.urlopen(request, timeout=10).read())
        for q in queues:
            if q["name"].startswith(TEST_PREFIX):
                path = f"{api}/queues/{urllib.parse.quote(q['vhost'], safe='')}/{urllib.parse.quote(q['name'], safe='')}"
                urllib.request.urlopen(urllib.request.Request(path, method="DELETE", headers={"Authorization": auth}), timeout=10)
    except OSError:
        pass          # management plugin absent: nothing to clean with
