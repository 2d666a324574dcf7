"""A task rides through a lost broker connection (rbench/runtime/reconnect.py), against the real broker.

The task's URIs point at TCP proxies in front of 5672 (tests/proxy.py); a timer thread cuts
every connection (or closes a proxy for good) while the task publishes and consumes. What the
recorded Parquet must then show: every acked message consumed (once, plus redeliveries the
``redelivered`` column flags), in-flight messages marked ``connection_lost`` and never re-sent,
consumers back, and the reconnect in the task's result. Queues are deleted afterwards.
"""
from __future__ import annotations

import asyncio
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.config.types import ClusterTarget, PublisherSpec
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.errors import ConnectError, ConnectionLost
from rbench.plan import plan
from rbench.runtime.stamp import new_payload, write_stamp
from rbench.runtime.task import TaskRun
from tests.loops import LoopRunner
from tests.proxy import MakeProxy, TcpProxy, host_port
from tests.runhelpers import delete_queues, keys, read, workload_dict

pytestmark = pytest.mark.timeout(120)

RATE, DURATION, PRODUCERS = 200, 4.0, 2


@pytest.fixture
def unique_name(unique_name: str) -> str:
    """The session's unique name without the test id's brackets (pamqp, under aiopika, refuses them)."""
    return re.sub(r"[^A-Za-z0-9_.:-]", "-", unique_name)


@pytest.fixture
def queues(unique_name: str, amqp_url: str) -> Iterator[list[str]]:
    """The test's two queue names; both are deleted afterwards, over a direct connection."""
    names = [f"{unique_name}-1", f"{unique_name}-2"]
    yield names
    delete_queues(amqp_url, names)


def _target(uri: str) -> ClusterTarget:
    return ClusterTarget("admin", (uri,))


def _plan(uris: list[str], name: str, tmp_path: Path, **overrides: Any) -> Any:
    data = workload_dict(uris[0], name, **{"driver": "amqp091", "producers": PRODUCERS, "consumers": 2, "rate": RATE,
                                           "duration": DURATION, **overrides})
    data["clusters"] = [{"name": "local", "uris": uris}]
    # not auto-delete: a cut drops the consumers, and an auto-delete queue would go (and its messages with it)
    data["queues"] = {"pattern": f"{name}-%d", "from": 1, "to": 2, "durable": False, "auto_delete": False}
    (p,) = plan(workload_from_dict(data), "local", 1, "run", str(tmp_path))
    return p


def _after(seconds: float, action: Callable[[], Any]) -> threading.Timer:
    """Run ``action`` on a thread ``seconds`` from now (the task's own loop never blocks on the proxy)."""
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
    return timer


def _run(task: TaskRun, run: LoopRunner) -> dict[str, Any]:
    return run(task.run(), timeout=90)


def _check_rode_through(result: dict[str, Any], run_dir: Path, cut_at_ns: int, rate: float = RATE) -> dict[str, Any]:
    """The checks every ride-through shares; the task's one reconnect record."""
    (rec,) = result["reconnects"]
    assert rec["task"] == 0 and rec["t_back_ns"] is not None
    assert cut_at_ns - 50_000_000 <= rec["t_lost_ns"] <= rec["t_back_ns"] < cut_at_ns + 10_000_000_000
    assert "***" in rec["uri"] and "guest:guest" not in rec["uri"]
    published, consumed = read(run_dir, "published"), read(run_dir, "consumed")
    assert published.num_rows == result["published"]
    # not re-sent: every (producer, seq) published once
    sent = keys(published)
    assert len(set(sent)) == len(sent)
    outcomes = Counter(published["outcome"].to_pylist())
    assert set(outcomes) <= {"ack", "connection_lost"}, outcomes
    assert outcomes["connection_lost"] == rec["in_flight"] == result["connection_lost"]
    # every acked message consumed; a copy beyond the first is a redelivery, flagged as one
    copies = Counter(keys(consumed))
    flagged = Counter(k for k, r in zip(keys(consumed), consumed["redelivered"].to_pylist()) if r)
    acked = [k for k, o in zip(sent, published["outcome"].to_pylist()) if o == "ack"]
    assert all(copies[k] >= 1 for k in acked), f"{sum(1 for k in acked if not copies[k])} acked message(s) never consumed"
    assert all(n - flagged[k] <= 1 for k, n in copies.items()), "a message consumed twice without the redelivered flag"
    assert set(copies) <= set(sent)
    # the schedule went on: what was not published in the gap is counted as skipped, not sent in a burst
    planned = PRODUCERS * rate * DURATION
    assert rec["skipped"] == sum(result["skipped_disconnected"]) > 0
    assert 0.95 * planned <= published.num_rows + rec["skipped"] <= planned
    gap_ns = rec["t_back_ns"] - rec["t_lost_ns"]
    assert rec["skipped"] <= PRODUCERS * rate * (gap_ns / 1e9 + 0.2) + PRODUCERS
    t_sent = published["t_sent"].to_numpy()
    t_int = published["t_intended"].to_numpy()
    back = t_sent >= rec["t_back_ns"]
    assert back.any() and (t_int[back] >= rec["t_back_ns"] - 1_000_000_000 / rate).all(), \
        "a slot due while disconnected was sent after the reconnect"
    # both consumers came back
    after = consumed["t_received"].to_numpy() > rec["t_back_ns"]
    assert set(consumed["consumer"].to_numpy()[after].tolist()) == {0, 1}
    return rec


def _cut_and_check(task: TaskRun, proxy: TcpProxy, tmp_path: Path, run: LoopRunner, rate: float) -> dict[str, Any]:
    """Run ``task`` with every connection through ``proxy`` cut 1.8 s in; the checks every ride-through shares."""
    cut_at: list[int] = []

    def cut() -> None:
        cut_at.append(time.time_ns())
        assert proxy.cut() >= 1

    _after(1.8, cut)
    result = _run(task, run)
    assert cut_at
    rec = _check_rode_through(result, tmp_path / "run", cut_at[0], rate)
    assert f":{proxy.port}/" in rec["uri"]
    return rec


# aio-pika tops out near 1k msg/s per task on a loaded 2-core machine: keep it well below that.
# connections: per driver opened, how many the proxy sees (amqp10 declares over a second, AMQP 0.9.1 connection)
@pytest.mark.parametrize("driver, rate, connections", [("amqp091", RATE, 1), ("aiopika", 100, 1), ("amqp10", RATE, 2)])
def test_a_cut_connection_is_ridden_through(driver: str, rate: int, connections: int, amqp_url: str, unique_name: str,
                                            queues: list[str], tcp_proxy: MakeProxy, tmp_path: Path,
                                            run: LoopRunner) -> None:
    proxy = tcp_proxy(host_port(amqp_url, 5672))
    task = TaskRun(_plan([proxy.uri(amqp_url)], unique_name, tmp_path, driver=driver, rate=rate), 0, None, None)
    _cut_and_check(task, proxy, tmp_path, run, rate)
    assert proxy.accepted == 2 * connections  # the first connection(s) and the reconnect


def test_per_client_connections_ride_through_a_cut_of_them_all(amqp_url: str, unique_name: str, queues: list[str],
                                                               tcp_proxy: MakeProxy, tmp_path: Path,
                                                               run: LoopRunner) -> None:
    """connections: per_client (issue 32): four connections, every one cut; the pool re-opens all four."""
    proxy = tcp_proxy(host_port(amqp_url, 5672))
    task = TaskRun(_plan([proxy.uri(amqp_url)], unique_name, tmp_path, connections="per_client"), 0, None, None)
    _cut_and_check(task, proxy, tmp_path, run, RATE)
    assert proxy.accepted == 2 * (PRODUCERS + 2)


def test_losing_one_of_a_tasks_connections_is_ridden_through(amqp_url: str, unique_name: str, queues: list[str],
                                                             tcp_proxy: MakeProxy, tmp_path: Path,
                                                             run: LoopRunner) -> None:
    """Two URIs (two proxies to the same broker): per_client connections alternate between them; cutting
    only the second proxy's loses half the task's connections, and the task re-opens them and goes on."""
    first, second = tcp_proxy(host_port(amqp_url, 5672)), tcp_proxy(host_port(amqp_url, 5672))
    task = TaskRun(_plan([first.uri(amqp_url), second.uri(amqp_url)], unique_name, tmp_path,
                         connections="per_client"), 0, None, None)
    cut_at: list[int] = []

    def cut() -> None:
        cut_at.append(time.time_ns())
        assert second.cut() == 2                     # producer-1 and consumer-1 went to the second URI first

    _after(1.8, cut)
    result = _run(task, run)
    assert cut_at and first.accepted == second.accepted == 4     # 2 each, then the whole pool again, still spread
    _check_rode_through(result, tmp_path / "run", cut_at[0])
    assert result["connect"]["opened"] == 2 * (PRODUCERS + 2)


def test_a_stream_task_rides_through_and_its_consumers_resume_where_they_stopped(
        amqp_url: str, stream_url: str, unique_name: str, queues: list[str], tcp_proxy: MakeProxy, tmp_path: Path,
        run: LoopRunner) -> None:
    """The stream driver: the cut connections (locator, publishers', consumers') are one loss; the publishers
    come back on the stream, and each consumer resumes at the first offset it had not handled, so nothing
    is delivered twice (a stream has no redelivered flag to tell a copy by)."""
    proxy = tcp_proxy(host_port(stream_url, 5552))
    data = workload_dict(amqp_url, unique_name, **{"driver": "stream", "producers": PRODUCERS, "consumers": 2,
                                                   "rate": RATE, "duration": DURATION})
    data["clusters"] = [{"name": "local", "uris": [amqp_url], "stream_uris": [proxy.uri(stream_url)]}]
    data["queues"] = {"pattern": f"{unique_name}-%d", "from": 1, "to": 2, "type": "stream"}
    (p,) = plan(workload_from_dict(data), "local", 1, "run", str(tmp_path))
    _cut_and_check(TaskRun(p, 0, None, None), proxy, tmp_path, run, RATE)
    consumed = read(tmp_path / "run", "consumed")
    copies = Counter(keys(consumed))
    assert max(copies.values()) == 1, "a stream message delivered twice after the reconnect"


@pytest.mark.loops("uvloop")
def test_fail_over_to_the_next_uri_when_the_first_is_gone(amqp_url: str, unique_name: str, queues: list[str],
                                                          tcp_proxy: MakeProxy, tmp_path: Path,
                                                          run: LoopRunner) -> None:
    """uvloop only (as executors run): URI 1 goes away for good, URI 2 (another way to the same broker) takes over."""
    first, second = tcp_proxy(host_port(amqp_url, 5672)), tcp_proxy(host_port(amqp_url, 5672))
    task = TaskRun(_plan([first.uri(amqp_url), second.uri(amqp_url)], unique_name, tmp_path), 0, None, None)
    cut_at: list[int] = []

    def gone() -> None:
        cut_at.append(time.time_ns())
        first.close()                          # stops listening and aborts its connections: node 1 is dead

    _after(1.8, gone)
    result = _run(task, run)
    rec = _check_rode_through(result, tmp_path / "run", cut_at[0])
    assert f":{second.port}/" in rec["uri"]
    assert second.accepted == 1                # the URI after the dead one was tried first, and answered


@pytest.mark.loops("uvloop")
def test_reconnect_timeout_0_fails_the_task_as_before(amqp_url: str, unique_name: str, queues: list[str],
                                                      tcp_proxy: MakeProxy, tmp_path: Path, run: LoopRunner) -> None:
    """uvloop only: a lost connection with reconnect_timeout 0 fails the task, uncommitted."""
    proxy = tcp_proxy(host_port(amqp_url, 5672))
    task = TaskRun(_plan([proxy.uri(amqp_url)], unique_name, tmp_path, reconnect_timeout=0), 0, None, None)
    _after(1.5, proxy.cut)
    started = time.monotonic()
    with pytest.raises(ConnectionLost) as info:
        _run(task, run)
    assert time.monotonic() - started < 10
    assert "reconnect_timeout is 0" in str(info.value)
    assert proxy.accepted == 1
    assert not list((tmp_path / "run").glob("**/_COMMITTED"))


@pytest.mark.loops("uvloop")
def test_giving_up_after_reconnect_timeout_is_one_masked_line(amqp_url: str, unique_name: str, queues: list[str],
                                                             tcp_proxy: MakeProxy, tmp_path: Path,
                                                             run: LoopRunner) -> None:
    """uvloop only: the only URI goes away for good; after reconnect_timeout the task fails naming it, masked."""
    proxy = tcp_proxy(host_port(amqp_url, 5672))
    uri = proxy.uri(amqp_url)
    task = TaskRun(_plan([uri], unique_name, tmp_path, reconnect_timeout=2), 0, None, None)
    gone_at: list[float] = []

    def gone() -> None:
        gone_at.append(time.monotonic())
        proxy.close()

    _after(1.5, gone)
    with pytest.raises(ConnectError) as info:
        _run(task, run)
    waited = time.monotonic() - gone_at[0]
    assert 2.0 <= waited < 8, waited
    message = str(info.value)
    assert "\n" not in message and "guest:guest" not in message
    assert f"amqp://guest:***@127.0.0.1:{proxy.port}/" in message
    assert "reconnect_timeout 2 s" in message and "refused" in message.lower(), message
    assert not list((tmp_path / "run").glob("**/_COMMITTED"))


@pytest.mark.loops("uvloop")
def test_a_task_that_only_consumes_reconnects_too(amqp_url: str, unique_name: str, queues: list[str],
                                                  tcp_proxy: MakeProxy, tmp_path: Path, run: LoopRunner) -> None:
    """uvloop only: no publisher notices the loss, the driver's on_lost does; the consumers come back
    and take what a direct publisher sends after the cut."""
    proxy = tcp_proxy(host_port(amqp_url, 5672))
    p = _plan([proxy.uri(amqp_url)], unique_name, tmp_path, producers=0, duration=4, drain_timeout=1)
    task = TaskRun(p, 0, None, None)

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        runner = loop.create_task(task.run())
        await asyncio.sleep(1.0)
        await loop.run_in_executor(None, proxy.cut)
        deadline = time.monotonic() + 10
        while not (task.reconnector.records and task.reconnector.records[0].t_back_ns) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        direct = Amqp091Driver()                 # not through the proxy
        await direct.open(_target(amqp_url))
        try:
            for q in queues:
                pub = await direct.publisher(PublisherSpec(0, q, confirm=True), _NullSink())
                body = new_payload(24)
                for seq in range(10):
                    await pub.ready()
                    write_stamp(body, 0, seq, time.time_ns(), time.time_ns())
                    pub.publish(body, seq)
                assert await pub.drain(5) == 0
                await pub.aclose()
        finally:
            await direct.aclose()
        return await runner

    result = run(main(), timeout=60)
    (rec,) = result["reconnects"]
    assert rec["t_back_ns"] is not None and rec["in_flight"] == 0 and rec["skipped"] == 0
    assert result["consumed"] == 20


class _NullSink:
    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        pass

    def on_return(self, body: bytes | memoryview, t_ns: int) -> None:
        pass

