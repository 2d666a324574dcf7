"""The local 3-node RabbitMQ cluster (scripts/cluster.sh) for tests marked ``cluster``.

Session-scoped: the cluster takes 20-50 s to start here, so every cluster test shares one. It is
stopped (and its files removed) when the session ends, also when a test failed or the start
itself failed half-way. A cluster that was already running before the session (``make cluster``)
is used as it is and left running: the session only stops what it started.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rbench.faults.executor import script_path

NODES = 3
START_TIMEOUT_S = 600


def _find(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/lib/rabbitmq/bin"]))


@dataclass(frozen=True)
class LocalCluster:
    """The running cluster: node names (rabbit-1@localhost …), AMQP URIs, and a way to ask a node."""

    nodes: tuple[str, ...]
    uris: tuple[str, ...]
    script: Path

    def sh(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(self.script), *args], capture_output=True, text=True, timeout=timeout)

    def running_nodes(self, via: int = 1) -> list[str]:
        """``rabbitmqctl cluster_status``'s running nodes as node ``via`` (1-based) sees them."""
        ctl = _find("rabbitmqctl") or "rabbitmqctl"
        out = subprocess.run([ctl, "-q", "-n", self.nodes[via - 1], "cluster_status", "--formatter", "json"],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        return sorted(json.loads(out)["running_nodes"])


@pytest.fixture(scope="session")
def rabbit_cluster() -> Iterator[LocalCluster]:
    if _find("rabbitmq-server") is None:
        pytest.skip("rabbitmq-server is not installed (sudo apt-get install rabbitmq-server): no local cluster")
    script = script_path()
    was_running = subprocess.run(["bash", str(script), "status", str(NODES)], capture_output=True).returncode == 0
    try:
        started = subprocess.run(["bash", str(script), "start", str(NODES)], capture_output=True, text=True,
                                 timeout=START_TIMEOUT_S)
        if started.returncode != 0:
            pytest.fail(f"scripts/cluster.sh start {NODES} failed: {(started.stderr or started.stdout).strip()[-500:]}")
        uris = subprocess.run(["bash", str(script), "uris", str(NODES)], capture_output=True, text=True,
                              check=True).stdout.split()
        yield LocalCluster(nodes=tuple(f"rabbit-{i}@localhost" for i in range(1, NODES + 1)), uris=tuple(uris),
                           script=script)
    finally:
        if not was_running:
            subprocess.run(["bash", str(script), "stop", str(NODES), "--clean"], capture_output=True, timeout=300)
