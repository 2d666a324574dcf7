"""The executor runtime against the real broker, without Spark: one task, one event loop."""
from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path

import aio_pika
import pytest

from rbench.config.load import workload_from_dict
from rbench.errors import ConnectError
from rbench.plan import plan
from rbench.runtime.task import TaskRun, run_task
from tests.loops import LoopRunner
from tests.runhelpers import keys, read, workload_dict

DRIVERS = ["aiopika"]
try:
    import rbench.drivers.amqp091  # noqa: F401
    DRIVERS.append("amqp091")
except ImportError:
    pass


def run_dir_of(tmp_path: Path) -> Path:
    return tmp_path / "run"


@pytest.mark.parametrize("driver", DRIVERS)
def test_every_published_message_is_consumed_exactly_once(driver: str, amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    # aio-pika tops out near 1k msg/s per task on a loaded 2-core machine: keep it well below that
    rate = 500 if driver == "amqp091" else 150
    w = workload_from_dict(workload_dict(amqp_url, unique_name, driver=driver, rate=rate))
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    result = run_task(p)
    published, consumed = read(tmp_path / "run", "published"), read(tmp_path / "run", "consumed")
    # a producer that falls behind drops its backlog at the step end, so allow a shortfall under load
    assert result["published"] == published.num_rows
    assert 0.95 * 2 * rate * 2 <= published.num_rows <= 2 * rate * 2
    assert result["consumed"] == consumed.num_rows
    sent = keys(published)
    assert len(set(sent)) == len(sent)
    counts = Counter(keys(consumed))
    assert set(counts) == set(sent) and max(counts.values()) == 1
    assert set(published["outcome"].to_pylist()) == {"ack"}
    assert all(c is not None and c >= s for c, s in zip(published["t_confirmed"].to_pylist(), published["t_sent"].to_pylist()))
    # the stamp round-trips the producer's timestamps exactly
    by_key = dict(zip(sent, zip(published["t_intended"].to_pylist(), published["t_sent"].to_pylist())))
    for k, ti, ts in zip(keys(consumed), consumed["t_intended"].to_pylist(), consumed["t_sent"].to_pylist()):
        assert by_key[k] == (ti, ts)
    for m in (tmp_path / "run").glob("*/local/task-00000/attempt-0/_COMMITTED"):
        assert json.loads(m.read_text())["interrupted"] is False


def test_open_loop_schedule_records_intended_times(amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    w = workload_from_dict(workload_dict(amqp_url, unique_name, producers=1, consumers=1, rate=200, duration=1))
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    run_task(p)
    t = read(tmp_path / "run", "published")
    intended = sorted(t["t_intended"].to_pylist())
    gaps = {b - a for a, b in zip(intended, intended[1:])}
    assert gaps <= {4_999_999, 5_000_000, 5_000_001}        # 1/200 s apart, whatever the broker did
    assert all(s >= i for s, i in zip(t["t_sent"].to_pylist(), t["t_intended"].to_pylist()))


def test_unroutable_mandatory_messages_are_recorded_as_returned(amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    data = workload_dict(amqp_url, unique_name, producers=1, consumers=0, rate=100, duration=1,
                         exchange={"name": "amq.direct"}, routing_key=f"{unique_name}-nobody",
                         publisher={"confirm": True, "mandatory": True})
    data["queues"] = {"name": unique_name, "predeclared": True, "bind": False}    # no queue: nothing routes
    w = workload_from_dict(data)
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    result = run_task(p)
    t = read(tmp_path / "run", "published")
    assert result["returned"] == t.num_rows == 100
    assert set(t["outcome"].to_pylist()) == {"returned"}


def test_message_counts_stop_producers_and_consumers(amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    data = workload_dict(amqp_url, unique_name, producers=1, consumers=1, rate=1000,
                         publisher={"message_count": 300}, consumer={"message_count": 300})
    del data["duration"]
    w = workload_from_dict(data)
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    started = time.monotonic()
    result = run_task(p)
    assert result["published"] == 300 and result["consumed"] == 300
    assert time.monotonic() - started < 10


@pytest.mark.loops("uvloop")
def test_consumer_delay_and_prefetch_bound_the_consume_rate(amqp_url: str, unique_name: str, tmp_path: Path, run: LoopRunner) -> None:
    """uvloop only: run_task picks uvloop itself; `run` is just the clean-up."""
    # 5 ms per message with prefetch 1: one consumer cannot take more than ~200 msg/s
    data = workload_dict(amqp_url, unique_name, producers=1, consumers=1, rate=600, duration=1.5,
                         consumer={"prefetch": 1, "multi_ack_every": 0, "processing_delay": "5ms"}, drain_timeout=0.5)
    data["queues"] = {"name": unique_name, "durable": False, "auto_delete": False}
    w = workload_from_dict(data)
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    result = run_task(p)
    try:
        assert 0.95 * 900 <= result["published"] <= 900
        assert 0 < result["consumed"] <= 0.5 * result["published"]
    finally:
        async def cleanup() -> None:
            conn = await aio_pika.connect(amqp_url)
            ch = await conn.channel()
            await ch.queue_delete(unique_name)
            await conn.close()
        run(cleanup())


@pytest.mark.loops("uvloop")
def test_stop_flushes_and_commits_as_interrupted(amqp_url: str, unique_name: str, tmp_path: Path, run: LoopRunner) -> None:
    """uvloop only (the loop executors run tasks on): a 1.5 s run, not worth doubling."""
    w = workload_from_dict(workload_dict(amqp_url, unique_name, duration=30))
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    task = TaskRun(p, 0, None, None)

    async def main() -> dict:
        loop = asyncio.get_running_loop()
        loop.call_later(1.5, task.interrupt)
        return await task.run()

    started = time.monotonic()
    result = run(main())
    assert time.monotonic() - started < 10
    assert result["interrupted"] is True
    published = read(tmp_path / "run", "published")
    assert 0 < published.num_rows == result["published"] < 2 * 500 * 30
    markers = list((tmp_path / "run").glob("*/local/task-00000/attempt-0/_COMMITTED"))
    assert len(markers) == 2 and all(json.loads(m.read_text())["interrupted"] for m in markers)


def test_wrong_password_fails_fast_with_masked_uri(amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    bad = amqp_url.replace("guest:guest", "guest:wrong-secret")
    w = workload_from_dict(workload_dict(bad, unique_name))
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    started = time.monotonic()
    with pytest.raises(ConnectError) as info:
        run_task(p)
    assert time.monotonic() - started < 10
    assert "authentication refused" in str(info.value) and "wrong-secret" not in str(info.value)
    # a failed attempt writes no commit marker: the reduce will ignore it
    assert not list((tmp_path / "run").glob("**/_COMMITTED"))


@pytest.mark.loops("uvloop")
def test_prometheus_metrics_are_served_while_the_task_runs(amqp_url: str, unique_name: str, tmp_path: Path, run: LoopRunner) -> None:
    """uvloop only (the loop executors run tasks on): a 4 s run, not worth doubling."""
    import urllib.request

    w = workload_from_dict(workload_dict(amqp_url, unique_name, duration=4, metrics_port=0))
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    task = TaskRun(p, 0, None, None)
    scraped: list[str] = []

    async def main() -> dict:
        loop = asyncio.get_running_loop()

        async def scrape() -> None:
            await asyncio.sleep(3.0)
            url = f"http://127.0.0.1:{task.progress.metrics_port}/metrics"
            body = await loop.run_in_executor(None, lambda: urllib.request.urlopen(url, timeout=5).read().decode())
            scraped.append(body)

        scraper = loop.create_task(scrape())
        result = await task.run()
        await scraper
        return result

    result = run(main())
    (text,) = scraped
    def value(prefix: str) -> float:
        line = next(ln for ln in text.splitlines() if ln.startswith(prefix))
        assert 'run_id="run"' in line and 'cluster="local"' in line and 'task="0"' in line
        return float(line.rsplit(" ", 1)[1])

    # scraped mid-run: counts are partial but present, and no larger than the run's totals
    assert 100 <= value("rbench_published_total{") <= result["published"]
    assert 100 <= value("rbench_consumed_total{") <= result["consumed"]
    assert 100 <= value("rbench_latency_seconds_count{") <= result["consumed"]
    assert 100 <= value("rbench_confirm_latency_seconds_count{") <= result["confirmed"]


def _burst_sizes(sent_ns: list[int], gap_ns: int) -> list[int]:
    """Sizes of runs of sends closer than gap_ns to the previous one."""
    sizes, run = [], 1
    ordered = sorted(sent_ns)
    for a, b in zip(ordered, ordered[1:]):
        if b - a < gap_ns:
            run += 1
        else:
            sizes.append(run)
            run = 1
    sizes.append(run)
    return sizes


@pytest.mark.parametrize("phase", ["spread", "aligned"])
def test_twenty_producers_at_50_per_second_are_spread_over_the_interval(amqp_url: str, unique_name: str,
                                                                        tmp_path: Path, phase: str) -> None:
    """20 producers × 50 msg/s in one task: the interval is 20 ms, so spread producers send 1 ms apart
    (no burst larger than one phase slot), while aligned ones send in bursts of 20 (the old behaviour)."""
    data = workload_dict(amqp_url, unique_name, driver="amqp091", producers=20, consumers=1, rate=50, duration=2,
                         queues={"pattern": f"{unique_name}-%d", "from": 1, "to": 1, "durable": False, "auto_delete": True},
                         schedule={"phase": phase})
    (p,) = plan(workload_from_dict(data), "local", 1, "run", str(tmp_path))
    run_task(p)
    pub = read(tmp_path / "run", "published")
    intended = pub["t_intended"].to_numpy()
    offsets_ms = sorted({int(round((t % 20_000_000) / 1e6)) % 20 for t in intended - intended.min()})
    # the sends themselves, those that left on time (a stall of a shared machine bunches late ones up,
    # which says nothing about the schedule): punctual = within 0.5 ms of the intended time, or 2 ms for
    # aligned producers, whose burst of 20 itself takes about a millisecond to write out
    sent = pub["t_sent"].to_numpy()
    punctual = sent[(sent - intended) < (500_000 if phase == "spread" else 2_000_000)]
    assert punctual.size > 0.5 * sent.size
    bursts = _burst_sizes(punctual.tolist(), gap_ns=300_000)
    in_bursts_over_2 = sum(b for b in bursts if b > 2) / sum(bursts)
    if phase == "spread":
        assert len(offsets_ms) == 20                     # one phase slot per producer, 1 ms apart
        assert in_bursts_over_2 < 0.05, bursts           # at most one slot's producer (and a neighbour) at once
    else:
        assert len(offsets_ms) == 1
        assert in_bursts_over_2 > 0.9 and max(bursts) >= 10
