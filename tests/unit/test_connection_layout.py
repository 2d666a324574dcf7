"""Connection layouts, their names and spread over URIs, connect statistics and the file-descriptor rule (issue 32)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rbench.config.load import workload_from_dict
from rbench.config.types import ClusterTarget, ConnectionLayout
from rbench.errors import ConnectError
from rbench.plan import plan
from rbench.runtime.connect_log import ConnectLog
from rbench.runtime.connections import roles, spread
from rbench.samples.connections import ConnectStats, percentile_ms, summary_line
from rbench.samples.tasks import TaskResult

ROOT = Path(__file__).resolve().parents[2]
URI = "amqp://guest:guest@127.0.0.1:5672/"


def task_plan(**fields: object) -> object:
    w = workload_from_dict({"name": "t", "clusters": [{"name": "a", "uris": [URI, "amqp://b/", "amqp://c/"]}],
                            "duration": 5, **fields})
    (task,) = plan(w, "a", 1, "run1", "/tmp/rbench-unit")
    return task


def test_per_client_groups_producers_and_consumers_by_their_channel_counts() -> None:
    layout = ConnectionLayout("per_client", producer_channels=2, consumer_channels=3)
    assert layout.client_connections(5, 4) == 3 + 2
    assert [layout.publisher_connection(i) for i in range(5)] == [0, 0, 1, 1, 2]
    assert [layout.consumer_connection(j, 5) for j in range(4)] == [3, 3, 3, 4]
    assert ConnectionLayout("per_client").client_connections(0, 0) == 1      # the declarations still need one


def test_n_connections_take_clients_round_robin_and_per_task_takes_them_all() -> None:
    fixed = ConnectionLayout("fixed", count=2)
    assert fixed.client_connections(4, 1) == 2
    assert [fixed.publisher_connection(i) for i in range(4)] == [0, 1, 0, 1]
    assert fixed.consumer_connection(0, 4) == 0
    per_task = ConnectionLayout()
    assert per_task.client_connections(20, 20) == 1 and per_task.consumer_connection(7, 20) == 0


def test_the_workload_fields_reach_the_task_plan() -> None:
    task = task_plan(producers=3, consumers=2, connections="per_client", producer_channels=2, idle_connections=4,
                     connect_rate="25/s")
    assert task.connections == ConnectionLayout("per_client", 1, 2, 1, 4, 25.0)
    assert roles(task) == ["producer-0", "producer-2", "consumer-0", "consumer-1"]
    assert task_plan(connections=3).connections.mode == "fixed"
    assert task_plan().connections == ConnectionLayout()          # workload files: per_task unless they say


def test_connections_spread_over_the_uris_round_robin() -> None:
    target = ClusterTarget("a", ("u0", "u1", "u2"), amqp10_uris=("a0", "a1", "a2"))
    assert [spread(target, i).uris[0] for i in range(5)] == ["u0", "u1", "u2", "u0", "u1"]
    assert spread(target, 1).uris == ("u1", "u2", "u0")            # the rest stay, in order, for fail-over
    assert spread(target, 2).amqp10_uris == ("a2", "a0", "a1")


def test_percentiles_are_nearest_rank_over_every_connection() -> None:
    values = list(range(1000, 101_000, 1000))                        # 1 … 100 ms
    assert percentile_ms(values, 0.5) == 50.0 and percentile_ms(values, 0.99) == 99.0
    assert percentile_ms(values, 1.0) == 100.0 and percentile_ms([], 0.5) is None
    merged = ConnectStats.total([ConnectStats(opened=1, connect_us=(1000,)),
                                 ConnectStats(opened=2, refused=1, timed_out=2, connect_us=(3000, 2000))])
    assert merged.opened == 3 and merged.refused == 1 and merged.timed_out == 2
    assert merged.figures()["connect_p50_ms"] == 2.0 and merged.figures()["connect_max_ms"] == 3.0
    line = summary_line("c", merged)
    assert "3 opened" in line and "1 refused" in line and "2 timed out" in line and "2.00/3.00/3.00 ms" in line


def test_the_task_result_keeps_its_connection_figures_typed() -> None:
    log = ConnectLog()
    log.connected(1_500_000)
    log.channel(400_000)
    log.failed(ConnectError("x: no answer", timed_out=True))
    log.failed(ConnectError("x: refused"))
    log.idle = 1
    result = TaskResult.from_json({"task": 0, "connect": log.as_dict()})
    assert result.connect == ConnectStats(opened=1, idle=1, refused=1, timed_out=1, connect_us=(1500,),
                                          channel_us=(400,))
    assert TaskResult.from_json(result.to_json()) == result
    assert TaskResult.from_json({"task": 0}).connect is None          # a run.json from before issue 32


def test_more_connections_than_the_hard_fd_limit_are_refused_naming_ulimit() -> None:
    code = f"""
import resource, sys
sys.path.insert(0, {str(ROOT)!r})
resource.setrlimit(resource.RLIMIT_NOFILE, (512, 1024))
from rbench.config.load import workload_from_dict
from rbench.errors import ConfigError
from rbench.plan import plan
from rbench.runtime.idle import raise_fd_limit
def task(idle):
    w = workload_from_dict({{"name": "t", "clusters": [{{"name": "a", "uris": [{URI!r}]}}], "duration": 5,
                            "idle_connections": idle}})
    return plan(w, "a", 1, "r", "/tmp/rbench-unit")[0]
print(raise_fd_limit(task(600)))          # 600 + margin > soft 512, < hard 1024: raised to the hard limit
try:
    raise_fd_limit(task(2000))
except ConfigError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "1024"
    assert out[1].startswith("idle_connections: task 0 plans 2,001 connections") and "ulimit -n" in out[1], out



def test_the_coordinator_raises_its_fd_limit_for_one_control_connection_per_task() -> None:
    code = f"""
import resource, sys
sys.path.insert(0, {str(ROOT)!r})
resource.setrlimit(resource.RLIMIT_NOFILE, (512, 2048))
from rbench.config.fds import raise_for_control
from rbench.errors import ConfigError
print(raise_for_control(64))              # 64 + margin fit in 512: left as it is
print(raise_for_control(1000))            # the thousandth executor's connection needs more: raised to the hard limit
try:
    raise_for_control(5000)
except ConfigError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[:2] == ["512", "2048"]
    assert out[2].startswith("tasks: 5,000 tasks each hold a control connection") and "ulimit -n" in out[2], out

def test_broker_memory_per_idle_connection_is_the_rise_while_they_opened() -> None:
    import pyarrow as pa

    from rbench.reduce.broker import BrokerSeries
    from rbench.reduce.connections import mem_per_connection_kib
    from rbench.samples.broker import BROKER_SCHEMA

    s = 1_000_000_000
    t0 = 100 * s
    samples = [(95 * s, 100.0e6), (97 * s, 101.0e6), (98 * s, 121.48e6), (99 * s, 122.0e6), (101 * s, 130.0e6)]
    table = pa.Table.from_pylist([{"run_id": "r", "cluster": "c", "t_ns": t, "source": "prometheus", "node": "n1",
                                   "queue": None, "metric": "resident_memory_bytes", "value": v} for t, v in samples],
                                 BROKER_SCHEMA)
    series = BrokerSeries("r", "c", t0, table)
    tasks = (TaskResult(task=0, instants={"consumers and publishers ready": 96.5, "idle connections open": 97.5}),
             TaskResult(task=1, instants={"consumers and publishers ready": 97.2, "idle connections open": 97.8}))
    # before: the sample at 95 s (100 MB, at or before the first task's ready); after: the last one before t0 (99 s)
    assert mem_per_connection_kib(series, tasks, 1000) == (122.0e6 - 100.0e6) / 1000 / 1024
    assert mem_per_connection_kib(series, tasks, 0) is None and mem_per_connection_kib(None, tasks, 10) is None
    assert mem_per_connection_kib(series, (TaskResult(task=0),), 10) is None     # a run without the instants
