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
    _one_rerun_for_tests_on_shared_parts(config, items)


# Tests that load a real broker, Spark or the 3-node cluster, on two cores the suite shares with them.
SHARED_PARTS_TIERS = ("broker", "spark", "cluster")


_RERUN_CAUSES: list[str] = []     # "node id: the first failure's line", for the summary


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if getattr(report, "outcome", None) == "rerun":     # pytest-rerunfailures sets an outcome pytest does not type
        crash = getattr(report.longrepr, "reprcrash", None)
        lines = (crash.message if crash is not None else report.longreprtext).strip().splitlines() or ["?"]
        _RERUN_CAUSES.append(f"{report.nodeid} ({report.when}): {lines[0][:300]}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Each rerun, with what its first try failed on: a rerun is a lead to follow, not a pass to forget."""
    if _RERUN_CAUSES:
        terminalreporter.section("run again after failing once (RBENCH_TEST_RERUNS)")
        for line in _RERUN_CAUSES:
            terminalreporter.write_line(line)


def _one_rerun_for_tests_on_shared_parts(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test of the broker, Spark and cluster tiers that fails is run once more (pytest-rerunfailures), and the
    summary names it ("RERUN", "1 rerun"); a unit test never is.

    Why: these tests drive a real RabbitMQ and a real Spark JVM on the 2 cores CI gives the whole suite, and the
    last CI tries each failed on one or two of ~1,100 such tests that passed when run again: some on the load
    alone (a 9 s AMQP 1.0 handshake, a rate search's last probe behind its schedule), some on a real fault the
    load exposed (a rate cap paced on uvloop's millisecond clock, a Ctrl-C landing inside Py4J's clean-up), each
    fixed. A rerun keeps one such test from discarding a whole session's work, and the summary line and the
    "RERUN" lines keep it visible so that it is looked into; a test that fails twice still fails the suite, so a
    wrong answer still does. RBENCH_TEST_RERUNS=0 turns reruns off (to hunt a flaky test)."""
    reruns = int(os.environ.get("RBENCH_TEST_RERUNS", "1"))
    if reruns <= 0 or not config.pluginmanager.hasplugin("rerunfailures"):
        return
    for item in items:
        tier = item.path.relative_to(config.rootpath).parts[1:2]
        if tier and tier[0] in SHARED_PARTS_TIERS and item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=reruns, reruns_delay=2))


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
