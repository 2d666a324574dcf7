"""The words of faults: actions, the verbs that carry them out, the local cluster's node names.

cluster.sh is the one source of the local cluster's layouts (ports, directories); validation only
needs to know which names a workload may give as a fault's ``node``, and which AMQP ports each
layout's nodes listen on, without starting a shell, so the naming and AMQP port rules are repeated
here, and tests/unit/test_fault_executor.py checks them against ``cluster.sh info`` for both layouts.
No pydantic here: the config model and the coordinator both read these.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

FAULT_ACTIONS = ("kill", "stop", "pause", "restart")
FAULT_VERBS = ("kill", "start", "stop", "pause", "resume")
# action → (the fault's verb, the verb that brings the node back); restart runs both at once
FAULT_STEPS: dict[str, tuple[str, str]] = {"kill": ("kill", "start"), "stop": ("stop", "start"),
                                           "pause": ("pause", "resume"), "restart": ("stop", "start")}

LOCAL_HOST = "localhost"
MAX_LOCAL_NODES = 9                       # cluster.sh MAX_NODES
# cluster.sh's layouts: RBENCH_CLUSTER_VERSION → (node name prefix, AMQP port of node 0)
LOCAL_LAYOUTS: dict[str, tuple[str, int]] = {"3": ("rabbit", 5700), "4": ("rabbit4", 5720)}
DEFAULT_LAYOUT = "3"
_LOCAL = re.compile(r"^(rabbit4?)-([1-9])(?:@localhost)?$")


@dataclass(frozen=True)
class LocalNode:
    """Node ``index`` of the local cluster of one layout: rabbit-i (3.10, the system's RabbitMQ) or
    rabbit4-i (RabbitMQ 4.0, ``RBENCH_CLUSTER_VERSION=4``): the name says which cluster a fault hits."""

    layout: str                 # a key of LOCAL_LAYOUTS, the RBENCH_CLUSTER_VERSION cluster.sh is run with
    index: int

    @property
    def name(self) -> str:
        return f"{LOCAL_LAYOUTS[self.layout][0]}-{self.index}"

    @property
    def erlang_name(self) -> str:
        return f"{self.name}@{LOCAL_HOST}"

    @property
    def amqp_port(self) -> int:
        return LOCAL_LAYOUTS[self.layout][1] + self.index


def local_node(node: str) -> LocalNode | None:
    """rabbit-i / rabbit4-i (with or without @localhost) as a LocalNode; None for any other name."""
    match = _LOCAL.match(node)
    if match is None:
        return None
    layout = next(k for k, (prefix, _) in LOCAL_LAYOUTS.items() if prefix == match.group(1))
    return LocalNode(layout, int(match.group(2)))


def local_node_names(n: int, layout: str = DEFAULT_LAYOUT) -> tuple[str, ...]:
    """The short names (rabbit-1 … rabbit-n, or rabbit4-1 …) a workload uses for a local cluster's nodes."""
    return tuple(LocalNode(layout, i).name for i in range(1, min(n, MAX_LOCAL_NODES) + 1))


def local_index(node: str) -> int | None:
    """i for rabbit-i, rabbit4-i or either @localhost; None for any other name."""
    found = local_node(node)
    return found.index if found else None


def layout_of_ports(ports: list[int]) -> str | None:
    """The local layout whose nodes' AMQP ports are every one of ``ports``; None: no single layout's."""
    for layout, (_, base) in LOCAL_LAYOUTS.items():
        if ports and all(base < p <= base + MAX_LOCAL_NODES for p in ports):
            return layout
    return None


def is_loopback_host(host: str) -> bool:
    """A host name that can only mean this machine (no DNS lookup: validation stays offline)."""
    import socket

    return host in ("localhost", "::1", socket.gethostname()) or host.startswith("127.")
