"""The workload's exchange and its durability, beside PerfTest on one broker (issue 29).

PerfTest (2.20 and later) declares its exchange durable (``Utils.exchangeDeclare`` →
``exchangeDeclare(exchange, type, true)``); rbench does the same by default, and an exchange that exists with
the other durability (an older rbench or PerfTest, or ``exchange.durable: false``) is used as it is, with one
warning, where the broker's 406 ``inequivalent arg 'durable'`` used to end the run. Each test uses an exchange
of its own (never the shared ``direct``), on every driver that declares exchanges and on both brokers.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace

import pytest

from rbench.codec.amqp091 import K
from rbench.config.load import workload_from_dict
from rbench.config.types import ClusterTarget, QueueDecl, Topology
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.drivers.base import load_driver
from rbench.drivers.exchanges import DURABILITY_MISMATCH
from rbench.drivers.replies import PreconditionFailed
from rbench.perftest import grammar, mapping
from rbench.plan import plan
from tests.brokers import Broker
from tests.runhelpers import delete_queues

pytestmark = pytest.mark.timeout(60)

DECLARING = ("amqp091", "aiopika", "amqp10")         # every driver that declares exchanges (stream has none)
WARNINGS_FROM = "rbench.drivers.exchanges"


@pytest.fixture
def name(unique_name: str) -> str:
    """A name every client accepts (pamqp, under aiopika, refuses brackets)."""
    return re.sub(r"[^A-Za-z0-9_.:-]", "-", unique_name)


@pytest.fixture
def cleanup(broker: Broker, name: str) -> Iterator[None]:
    """Delete this test's exchange and queue afterwards, on whichever broker it ran."""
    yield
    delete_queues(broker.amqp_url, [name])
    asyncio.run(_admin(broker, lambda d: d.delete_exchange(name)))


async def _admin(broker: Broker, work: Callable[[Amqp091Driver], Awaitable[None]]) -> None:
    admin = Amqp091Driver()
    await admin.open(ClusterTarget("admin", (broker.amqp_url,)))
    try:
        await work(admin)
    finally:
        await admin.aclose()


async def _raw_declare(driver: Amqp091Driver, exchange: str, durable: bool, passive: bool = False) -> None:
    """exchange.declare as another client sends it: no fallback, a refusal is raised."""
    ch = await driver.connection.channel()
    await ch.rpc(K.EXCHANGE_DECLARE, (0, exchange, "direct", passive, durable, False, False, False, {}),
                 (K.EXCHANGE_DECLARE_OK,), f"declare exchange {exchange!r}")
    await ch.close()


def predeclare(broker: Broker, exchange: str, durable: bool) -> None:
    asyncio.run(_admin(broker, lambda d: _raw_declare(d, exchange, durable)))


def declare_with(driver_name: str, broker: Broker, topology: Topology) -> None:
    """One task's declare on a fresh driver (as a task, a reconnect or a rate-search probe does)."""
    async def go() -> None:
        driver = load_driver(driver_name)
        await asyncio.wait_for(driver.open(ClusterTarget("exchange-test", (broker.amqp_url,))), 10)
        try:
            await asyncio.wait_for(driver.declare(topology), 10)
        finally:
            await asyncio.wait_for(driver.aclose(), 10)
    asyncio.run(go())


def _management(broker: Broker, path: str) -> object:
    auth = "Basic " + base64.b64encode(b"guest:guest").decode()
    request = urllib.request.Request(f"{broker.management_url}/{path}", headers={"Authorization": auth})
    return json.loads(urllib.request.urlopen(request, timeout=10).read())


def exchange_durable(broker: Broker, exchange: str) -> bool:
    found = _management(broker, f"exchanges/%2F/{urllib.parse.quote(exchange, safe='')}")
    assert isinstance(found, dict)
    return bool(found["durable"])


def bound_queues(broker: Broker, exchange: str) -> list[str]:
    found = _management(broker, f"exchanges/%2F/{urllib.parse.quote(exchange, safe='')}/bindings/source")
    assert isinstance(found, list)
    return [b["destination"] for b in found]


def warnings_about(caplog: pytest.LogCaptureFixture, exchange: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == WARNINGS_FROM and r.levelno == logging.WARNING and exchange in r.getMessage()]


def topology(exchange: str, queue: str, durable: bool | None = None) -> Topology:
    """A task's topology: the exchange (durable unless said), one queue bound to it."""
    made = Topology(exchange=exchange, queues=(QueueDecl(queue, durable=False),), bindings=((queue, queue),))
    return made if durable is None else replace(made, exchange_durable=durable)


@pytest.mark.parametrize("driver_name", DECLARING)
def test_the_default_declare_is_durable_as_perftest_declares_it(driver_name: str, broker: Broker, name: str,
                                                                 cleanup: None, caplog: pytest.LogCaptureFixture) -> None:
    declare_with(driver_name, broker, topology(name, name))
    assert exchange_durable(broker, name)
    predeclare(broker, name, durable=True)                # PerfTest after rbench: no 406
    assert bound_queues(broker, name) == [name] and warnings_about(caplog, name) == []


@pytest.mark.parametrize("driver_name", DECLARING)
def test_a_durable_exchange_is_used_as_it_is_by_a_non_durable_declare_said_once(
        driver_name: str, broker: Broker, name: str, cleanup: None, caplog: pytest.LogCaptureFixture) -> None:
    predeclare(broker, name, durable=True)                # PerfTest ran first
    caplog.set_level(logging.WARNING, logger=WARNINGS_FROM)
    for _ in range(2):                                    # a second declare (a reconnect, the next probe) is quiet
        declare_with(driver_name, broker, topology(name, name, durable=False))
    assert exchange_durable(broker, name)                 # used as it is, not re-made
    assert bound_queues(broker, name) == [name]           # the declare went on after the passive one
    (said,) = warnings_about(caplog, name)
    assert "already exists durable" in said and "asked for non-durable" in said


@pytest.mark.parametrize("driver_name", DECLARING)
def test_a_non_durable_exchange_is_used_as_it_is_by_the_default_declare_said_once(
        driver_name: str, broker: Broker, name: str, cleanup: None, caplog: pytest.LogCaptureFixture) -> None:
    predeclare(broker, name, durable=False)               # an older rbench or PerfTest ran first
    caplog.set_level(logging.WARNING, logger=WARNINGS_FROM)
    for _ in range(2):
        declare_with(driver_name, broker, topology(name, name))
    assert not exchange_durable(broker, name)
    assert bound_queues(broker, name) == [name]
    (said,) = warnings_about(caplog, name)
    assert "already exists non-durable" in said and "asked for durable" in said


def test_rbench_perftest_then_perftest_and_the_other_way_round(broker: Broker, name: str, cleanup: None) -> None:
    """The topology `rbench perftest -e NAME` plans is declared; PerfTest's durable declare then succeeds (it
    would have been refused before); and against the exchange PerfTest made, rbench's declare succeeds."""
    tokens = ["-z", "5", "-e", name, "-u", name, "-h", broker.amqp_url]
    workload = workload_from_dict(mapping.to_workload(grammar.parse(tokens)).workload)
    (task,) = plan(workload, workload.clusters[0].name, 1, "r", "/tmp/unused")
    assert task.topology.exchange == name and task.topology.exchange_durable
    declare_with("amqp091", broker, task.topology)
    predeclare(broker, name, durable=True)                # PerfTest's Utils.exchangeDeclare
    with pytest.raises(PreconditionFailed, match=re.escape(DURABILITY_MISMATCH)):
        predeclare(broker, name, durable=False)           # a client without the fallback is still refused
    asyncio.run(_admin(broker, lambda d: d.delete_exchange(name)))
    predeclare(broker, name, durable=True)                # PerfTest first, then rbench
    declare_with("amqp091", broker, task.topology)
    assert exchange_durable(broker, name) and bound_queues(broker, name) == [name]
