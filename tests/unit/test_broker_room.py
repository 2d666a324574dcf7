"""Issue 32 items 4 and 5: the broker's fd room before a run, its memory per connection, connections per GiB."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rbench.config.load import workload_from_dict
from rbench.coordinator.broker_facts import _node_fds
from rbench.coordinator.broker_room import HEADROOM, check_broker_room, room_problem
from rbench.coordinator.summary import mem_line
from rbench.errors import ConfigError
from rbench.plan import plan_run
from rbench.reduce.broker import BrokerSeries
from rbench.reduce.connections import connections_per_gib, mem_per_connection_kib
from rbench.reduce.leaderboard import connections_per_gib_board
from rbench.report.leaderboard_md import connections_lines
from rbench.samples import broker as bs
from rbench.samples.broker_facts import BrokerFacts, NodeFds
from rbench.samples.tasks import TaskResult

URI = "amqp://guest:guest@127.0.0.1:5672/"
# as /api/nodes stated them on this machine, limits raised (scripts/ensure-broker.sh, scripts/broker4.sh)
THREE_TEN = BrokerFacts(version="3.10.8", node_fds=(NodeFds("rabbit@localhost", 20000, 42, 17910, 10),))
FOUR_O = BrokerFacts(version="4.0.5", node_fds=(NodeFds("rabbit4@localhost", 20000, 47, 0, 0),))
BOOTED_LOW = BrokerFacts(version="3.10.8", node_fds=(NodeFds("rabbit@localhost", 1024, 39, 832, 0),))


def test_the_room_is_sockets_total_on_3_10_and_fd_total_less_fds_in_use_on_4_0() -> None:
    assert THREE_TEN.node_fds is not None and THREE_TEN.node_fds[0].room() == (17900, "sockets_total 17,910")
    assert FOUR_O.node_fds is not None and FOUR_O.node_fds[0].room() == (19953, "fd_total 20,000, 47 in use")
    assert NodeFds("n", None, None, None, None).room() is None


def test_a_plan_that_fits_passes_and_one_that_does_not_is_one_line_naming_the_limit() -> None:
    assert room_problem("a", 10_002, THREE_TEN) is None and room_problem("a", 10_002, FOUR_O) is None
    assert room_problem("a", 17900 - HEADROOM, THREE_TEN) is None
    line = room_problem("a", 2_002, BOOTED_LOW)
    assert line is not None and "\n" not in line
    assert line.startswith("cluster a: idle_connections/connections: the run plans 2,002 connections, but the broker "
                           "can take about 768 more (management API /api/nodes: rabbit@localhost: sockets_total 832)")
    assert "ulimit -n" in line and "scripts/ensure-broker.sh" in line
    assert room_problem("a", 30_000, FOUR_O) is not None
    # a broker that stated nothing (no management API) is not refused on a guess
    assert room_problem("a", 30_000, BrokerFacts(version="4.0.5")) is None


def test_nodes_of_a_cluster_add_their_room() -> None:
    two = BrokerFacts(node_fds=(NodeFds("a", 1024, 24, 0, 0), NodeFds("b", 1024, 24, 0, 0)))
    assert room_problem("c", 1500, two) is None and room_problem("c", 2000, two) is not None


def test_the_run_counts_every_tasks_client_and_idle_connections_before_any_opens() -> None:
    w = workload_from_dict({"name": "t", "clusters": [{"name": "a", "uris": [URI]}], "duration": 5, "producers": 4,
                            "consumers": 2, "connections": "per_client", "idle_connections": 400,
                            "queues": {"pattern": "q-%d", "from": 1, "to": 2}})
    plan = plan_run(w, "r", "/tmp/rbench-unit", {"a": 2})       # 2 tasks × (400 idle) + 6 clients' = 806
    check_broker_room(plan, {"a": BrokerFacts(node_fds=(NodeFds("n", 1024, 100, 0, 0),))})       # room 924 - 64
    with pytest.raises(ConfigError, match="plans 806 connections"):
        check_broker_room(plan, {"a": BrokerFacts(node_fds=(NodeFds("n", 1024, 200, 0, 0),))})
    check_broker_room(plan, None)


def test_node_fds_are_read_from_api_nodes_and_kept_in_run_json() -> None:
    nodes: list[Any] = [{"name": "rabbit@localhost", "fd_total": 20000, "fd_used": 42, "sockets_total": 17910,
                         "sockets_used": 3, "running": True},
                        {"name": "rabbit@down", "running": False}, {"fd_total": 5}]
    read = _node_fds(nodes)
    assert read == (NodeFds("rabbit@localhost", 20000, 42, 17910, 3),)
    assert _node_fds([]) is None
    facts = BrokerFacts(version="3.10.8", node_fds=read)
    assert BrokerFacts.from_json(json.loads(json.dumps(facts.to_json())), "broker") == facts


S = 1_000_000_000


def _series(rows: list[tuple[int, str, str, float]]) -> BrokerSeries:
    table = pa.Table.from_pylist([{"run_id": "r", "cluster": "c", "t_ns": t, "source": "management", "node": n,
                                   "queue": None, "metric": m, "value": v} for t, n, m, v in rows], bs.BROKER_SCHEMA)
    return BrokerSeries("r", "c", 200 * S, table)


def test_connection_memory_is_the_breakdowns_four_categories_summed_over_nodes() -> None:
    rows = [(t, "n1", "mem_used_bytes", 100e6 + k * 50e6) for k, t in enumerate((100 * S, 150 * S))]
    for k, t in enumerate((100 * S, 150 * S)):                      # sampled at the same times as mem_used
        for node in ("n1", "n2"):
            for i, metric in enumerate(bs.CONNECTION_MEMORY):
                rows.append((t, node, metric, 1e6 * (i + 1) + k * 10e6))
    rows.append((170 * S, "n1", "mem_used_bytes", 160e6))           # a sample the breakdown did not take
    series = _series(rows)
    assert list(series.connection_memory[:2]) == [2 * 10e6, 2 * 10e6 + 8 * 10e6]
    assert series.connection_memory[2] != series.connection_memory[2]          # NaN: not sampled then
    done = (TaskResult(task=0, instants={"consumers and publishers ready": 101.0, "idle connections open": 140.0}),)
    stale = (TaskResult(task=0, instants={"consumers and publishers ready": 101.0, "idle connections open": 147.0}),)
    assert mem_per_connection_kib(series, stale, 1000) == pytest.approx(60e6 / 1000 / 1024)      # 150 s is < 5 s after
    late = (TaskResult(task=0, instants={"consumers and publishers ready": 101.0, "idle connections open": 166.0}),)
    assert mem_per_connection_kib(series, late, 1000) is None       # no mem_used sample 5 s after: no figure
    # mem_used: the rise from 100 s to the last sample before t0 at least 5 s after the last idle connection opened
    # (170 s: the broker refreshes mem_used every 5 s); the breakdown, computed when asked: to its own (150 s)
    assert mem_per_connection_kib(series, done, 1000) == pytest.approx(60e6 / 1000 / 1024)
    assert mem_per_connection_kib(series, done, 1000, series.connection_memory) == pytest.approx(80e6 / 1000 / 1024)
    # a sample after the load ended (the tasks closing their connections) is never the "after" one
    assert mem_per_connection_kib(series, done, 1000, series.connection_memory, until_ns=149 * S) is None
    assert mem_per_connection_kib(series, done, 1000, until_ns=169 * S) == pytest.approx(50e6 / 1000 / 1024)   # 150 s
    assert mem_per_connection_kib(series, done, 1000, until_ns=149 * S) is None


def test_connections_per_gib_and_its_leaderboard() -> None:
    assert connections_per_gib(128.0) == 8192.0 and connections_per_gib(None) is None and connections_per_gib(0.0) is None
    step: dict[str, Any] = {"run_id": "r1", "step": 1, "connect_p99_ms": 500.0, "broker": "RabbitMQ 3.10.8"}
    steps = [{**step, "cluster": "three", "idle_connections": 1000, "broker_mem_per_connection_kib": 150.0},
             {**step, "cluster": "three", "run_id": "r2", "idle_connections": 10000, "broker_mem_per_connection_kib": 110.0,
              "broker_conn_mem_per_connection_kib": 96.0},
             {**step, "cluster": "four", "idle_connections": 10000, "broker_mem_per_connection_kib": 70.0},
             {**step, "cluster": "none", "idle_connections": 0, "broker_mem_per_connection_kib": None}]
    board = connections_per_gib_board(steps)
    assert [(r["cluster"], r["run_id"], r["rank"]) for r in board] == [("four", "r1", 1), ("three", "r2", 2)]
    assert board[1]["connections_per_gib"] == pytest.approx(1024 * 1024 / 110.0)
    md = "\n".join(connections_lines(board))
    assert "## Connections per GiB of broker memory" in md and "| 9,533 |" in md and "| 96.0 |" in md
    assert connections_lines([]) == []


def test_the_summary_line_says_both_readings_and_none_without_either() -> None:
    line = mem_line("default", 110.6, 96.04)
    assert line is not None and line.startswith("default: broker memory per idle connection 110.6 KiB of mem_used, "
                                                "96.0 KiB in its connection processes")
    assert mem_line("default", None, None) is None


def test_the_sampler_reads_each_nodes_breakdown(tmp_path: Path) -> None:
    from rbench.config.model import BrokerMetrics
    from rbench.config.types import ClusterTarget
    from rbench.coordinator.broker import BrokerSampler

    sampler = BrokerSampler(tmp_path, "r", ClusterTarget(name="c", uris=(URI,)), [], BrokerMetrics(), None,
                            memory_breakdown=True)
    answers = {"http://h/api/nodes/rabbit%40a/memory": {"memory": {"connection_readers": 10, "connection_writers": 20,
                                                                   "connection_channels": 30, "connection_other": 40,
                                                                   "queue_procs": 99}},
               "http://h/api/nodes/rabbit%40b/memory": {"memory": {"connection_readers": 1}}}
    sampler._get = lambda url, auth, timeout=None: json.dumps(answers[url]).encode()    # type: ignore[method-assign]
    rows = sampler._memory_breakdown(7, "http://h/api", ["rabbit@a", "rabbit@b"])
    assert [(r["node"], r["metric"], r["value"], r["t_ns"]) for r in rows] == [
        ("rabbit@a", "mem_connection_readers_bytes", 10.0, 7), ("rabbit@a", "mem_connection_writers_bytes", 20.0, 7),
        ("rabbit@a", "mem_connection_channels_bytes", 30.0, 7), ("rabbit@a", "mem_connection_other_bytes", 40.0, 7),
        ("rabbit@b", "mem_connection_readers_bytes", 1.0, 7)]
