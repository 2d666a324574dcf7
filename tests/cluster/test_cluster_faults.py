"""Faults on the real local 3-node cluster (scripts/cluster.sh), through the local executor."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from rbench.config.types import FaultPlan
from rbench.coordinator.faults import FaultController
from rbench.faults.executor import LocalExecutor
from tests.cluster_fixture import LocalCluster

pytestmark = pytest.mark.cluster
ALL = ["rabbit-1@localhost", "rabbit-2@localhost", "rabbit-3@localhost"]


def wait_for(cluster: LocalCluster, running: list[str], timeout_s: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout_s
    seen = cluster.running_nodes()
    while seen != running and time.monotonic() < deadline:
        time.sleep(1)
        seen = cluster.running_nodes()
    return seen


def test_the_cluster_has_three_running_nodes(rabbit_cluster: LocalCluster) -> None:
    assert rabbit_cluster.uris == ("amqp://127.0.0.1:5701", "amqp://127.0.0.1:5702", "amqp://127.0.0.1:5703")
    assert rabbit_cluster.running_nodes() == ALL
    assert rabbit_cluster.running_nodes(via=3) == ALL
    status = rabbit_cluster.sh("status")
    assert status.returncode == 0 and status.stdout.count(" running pid ") == 3


def test_kill_and_start_node_through_the_local_executor(rabbit_cluster: LocalCluster) -> None:
    ex = LocalExecutor(timeout_s=300)
    killed = ex.run("kill", "rabbit-2")
    assert killed.ok, killed.error
    assert (killed.t_end_ns - killed.t_start_ns) / 1e9 < 10
    assert wait_for(rabbit_cluster, ["rabbit-1@localhost", "rabbit-3@localhost"]) == ["rabbit-1@localhost", "rabbit-3@localhost"]
    assert "rabbit-2@localhost stopped" in rabbit_cluster.sh("status").stdout
    again = ex.run("kill", "rabbit-2")
    assert not again.ok and again.error == "kill rabbit-2: exit 1: cluster: rabbit-2@localhost is not running"
    started = ex.run("start", "rabbit-2")
    assert started.ok, started.error
    assert wait_for(rabbit_cluster, ALL) == ALL


def test_pause_and_resume(rabbit_cluster: LocalCluster) -> None:
    ex = LocalExecutor(timeout_s=60)
    assert ex.run("pause", "rabbit-3").ok
    try:
        assert "rabbit-3@localhost paused" in rabbit_cluster.sh("status").stdout
    finally:
        assert ex.run("resume", "rabbit-3").ok
    assert "rabbit-3@localhost running" in rabbit_cluster.sh("status").stdout


def test_the_controller_restores_a_node_left_down_at_the_end_of_the_run(rabbit_cluster: LocalCluster,
                                                                         tmp_path: Path) -> None:
    t0 = time.time_ns()
    c = FaultController("local", (FaultPlan(0, "kill", "rabbit-2", 0.5, None),), LocalExecutor(timeout_s=300),
                        lambda: t0, out=None, log_path=tmp_path / "local.log").start()
    try:
        assert wait_for(rabbit_cluster, ["rabbit-1@localhost", "rabbit-3@localhost"], 30) == \
            ["rabbit-1@localhost", "rabbit-3@localhost"]
    finally:
        (record,) = c.stop()
    assert record.ok, record.error
    assert record.t_start_ns - t0 >= 0.5e9
    assert record.t_back_start_ns is not None and record.t_back_end_ns is not None
    assert record.t_end_ns <= record.t_back_start_ns < record.t_back_end_ns
    assert wait_for(rabbit_cluster, ALL) == ALL
    assert "start-node 2" in (tmp_path / "local.log").read_text()
