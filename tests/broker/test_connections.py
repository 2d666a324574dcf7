"""Connection layouts, idle connections and connect latency, against both brokers (issue 32).

The broker's own count is the witness: the management API's /api/connections, filtered by the
connection_name client property rbench gives each connection (run id, cluster, task, role), read while
the task runs. Loads are short and low; nothing here asserts a speed.
"""
from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from rbench.config.load import workload_from_dict
from rbench.config.types import TaskPlan
from rbench.perftest import grammar, mapping
from rbench.plan import plan
from rbench.runtime.task import TaskRun
from rbench.samples.connections import ConnectStats
from tests.brokers import Broker
from tests.runhelpers import keys, read, workload_dict

pytestmark = pytest.mark.timeout(180)
AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


def connection_names(broker: Broker, run_id: str) -> set[str]:
    """The connection_name of every connection the broker lists for this run (management API)."""
    req = urllib.request.Request(f"{broker.management_url}/connections?columns=client_properties,name",
                                 headers={"Authorization": AUTH})
    with urllib.request.urlopen(req, timeout=10) as resp:
        listed = json.load(resp)
    names = {str((c.get("client_properties") or {}).get("connection_name", "")) for c in listed}
    return {n for n in names if f" {run_id} " in n}


def run_watched(broker: Broker, task: TaskPlan, until: Callable[[set[str]], bool],
                stop: bool = True) -> tuple[dict[str, Any], set[str]]:
    """Run ``task`` in a thread and list its connections on the broker until ``until`` holds, then (``stop``)
    interrupt it as Ctrl-C would; without ``stop`` it runs its schedule out. The management API lists a
    connection once its first statistics are in (up to 5 s on 3.10), so the tasks run long and stop when seen.
    Returns the task's result and every connection name seen open."""
    out: dict[str, Any] = {}
    started = threading.Event()

    async def main() -> dict[str, Any]:
        run = TaskRun(task, 0, None, None)
        out["loop"], out["interrupt"] = asyncio.get_running_loop(), run.interrupt
        started.set()
        return await run.run()

    def go() -> None:
        try:
            out["result"] = uvloop.run(main())
        except BaseException as exc:       # re-raised in the test's thread
            out["error"] = exc
        started.set()

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    started.wait(30)
    seen: set[str] = set()
    while thread.is_alive():
        seen |= connection_names(broker, task.run_id)
        if until(seen):
            if stop:
                out["loop"].call_soon_threadsafe(out["interrupt"])
            break
        time.sleep(0.25)
    thread.join(120)
    if "error" in out:
        raise out["error"]
    return out["result"], seen


def perftest_plan(broker: Broker, tokens: list[str], tmp_path: Path) -> TaskPlan:
    w = workload_from_dict(mapping.to_workload(grammar.parse(["-h", broker.amqp_url, *tokens])).workload)
    (task,) = plan(w, "default", 1, f"cx{uuid.uuid4().hex[:8]}", str(tmp_path))
    return task


def test_perftest_opens_one_connection_per_producer_and_consumer(broker: Broker, unique_name: str, tmp_path: Path) -> None:
    task = perftest_plan(broker, ["-x", "3", "-y", "2", "-u", unique_name, "-ad", "true", "-r", "50", "-z", "60"],
                         tmp_path)
    result, seen = run_watched(broker, task, lambda names: len(names) >= 5)
    roles = sorted(n.rsplit(" ", 1)[1] for n in seen)
    assert roles == ["consumer-0", "consumer-1", "producer-0", "producer-1", "producer-2"], seen
    assert result["connect"]["opened"] == 5 and result["connect"]["refused"] == 0


def test_perftest_channel_counts_share_a_connection(broker: Broker, unique_name: str, tmp_path: Path) -> None:
    # -x 2 -X 2: four producers, two connections of two channels each, as PerfTest opens them
    task = perftest_plan(broker, ["-x", "2", "-X", "2", "-y", "1", "-u", unique_name, "-ad", "true", "-r", "20",
                                  "-z", "60"], tmp_path)
    result, seen = run_watched(broker, task, lambda names: len(names) >= 3)
    assert sorted(n.rsplit(" ", 1)[1] for n in seen) == ["consumer-0", "producer-0", "producer-2"], seen
    assert len(task.publishers) == 4 and result["connect"]["opened"] == 3


def test_n_connections_per_task_carry_every_client_and_lose_nothing(broker: Broker, unique_name: str,
                                                                      tmp_path: Path) -> None:
    w = workload_from_dict(workload_dict(broker.amqp_url, unique_name, driver="amqp091", producers=4, consumers=2,
                                         rate=100, duration=6, connections=2,
                                         queues={"pattern": f"{unique_name}-%d", "from": 1, "to": 1}))
    (task,) = plan(w, "local", 1, f"cx{uuid.uuid4().hex[:8]}", str(tmp_path))
    result, seen = run_watched(broker, task, lambda names: len(names) >= 2, stop=False)
    assert sorted(n.rsplit(" ", 1)[1] for n in seen) == ["conn-0", "conn-1"], seen
    assert result["connect"]["opened"] == 2
    published, consumed = read(tmp_path / task.run_id, "published"), read(tmp_path / task.run_id, "consumed")
    assert published.num_rows == result["published"] > 0
    assert set(published["outcome"].to_pylist()) == {"ack"}
    sent, got = set(keys(published)), set(keys(consumed))
    assert sent == got                                # every message moved: lost 0
    assert {p for p, _ in sent} == {0, 1, 2, 3}


def test_aiopika_and_amqp10_drivers_open_one_connection_per_client_as_well(broker: Broker, unique_name: str,
                                                                          tmp_path: Path) -> None:
    """aiopika's connections are seen on the broker by name; amqp10's AMQP 1.0 connections carry the name as
    their container-id, which /api/connections does not show, so the task's own count says it there."""
    for driver in ("aiopika", "amqp10"):
        w = workload_from_dict(workload_dict(broker.amqp_url, f"{unique_name}-{driver}", driver=driver, producers=2,
                                             consumers=1, rate=20, duration=60 if driver == "aiopika" else 3,
                                             connections="per_client",
                                             queues={"pattern": f"{unique_name}-{driver}-%d", "from": 1, "to": 1}))
        (task,) = plan(w, "local", 1, f"cx{uuid.uuid4().hex[:8]}", str(tmp_path))
        if driver == "aiopika":
            result, seen = run_watched(broker, task, lambda names: len(names) >= 3)
            assert sorted(n.rsplit(" ", 1)[1] for n in seen) == ["consumer-0", "producer-0", "producer-1"], seen
        else:
            result, _ = run_watched(broker, task, lambda names: False, stop=False)
        assert result["connect"]["opened"] == 3 and result["connect"]["refused"] == 0
        published, consumed = read(tmp_path / task.run_id, "published"), read(tmp_path / task.run_id, "consumed")
        assert published.num_rows == result["published"] > 0
        if driver == "amqp10":
            assert set(keys(published)) == set(keys(consumed))        # every message moved over 3 connections


def test_idle_connections_report_connect_latency(broker: Broker, unique_name: str, tmp_path: Path) -> None:
    w = workload_from_dict(workload_dict(broker.amqp_url, unique_name, driver="amqp091", producers=1, consumers=1,
                                         rate=20, duration=60, idle_connections=200, connect_rate="400/s",
                                         queues={"pattern": f"{unique_name}-%d", "from": 1, "to": 1}))
    (task,) = plan(w, "local", 1, f"cx{uuid.uuid4().hex[:8]}", str(tmp_path))
    result, seen = run_watched(broker, task, lambda names: len(names) >= 201)    # per_task: 1 + 200 idle
    assert len([n for n in seen if " idle-" in n]) == 200
    stats = ConnectStats.from_json(result["connect"], "connect")
    assert stats.opened == 201 and stats.idle == 200 and stats.refused == stats.timed_out == 0
    assert len(stats.channel_us) == 200
    f = stats.figures()
    assert 0 < f["connect_p50_ms"] <= f["connect_p99_ms"] <= f["connect_max_ms"]
    assert 0 < f["channel_open_p50_ms"] <= f["channel_open_p99_ms"] <= f["channel_open_max_ms"]
    assert read(tmp_path / task.run_id, "published").num_rows == result["published"] > 0
