"""The words of faults: actions, the verbs that carry them out, the local cluster's node names.

cluster.sh is the one source of the local cluster's layout (ports, directories); validation only
needs to know which names a workload may give as a fault's ``node`` without starting a shell, so
the naming rule is repeated here, and tests/unit/test_fault_executor.py checks it against
``cluster.sh info``. No pydantic here: the config model and the coordinator both read these.
"""
from __future__ import annotations

import re

FAULT_ACTIONS = ("kill", "stop", "pause", "restart")
FAULT_VERBS = ("kill", "start", "stop", "pause", "resume")
# action → (the fault's verb, the verb that brings the node back); restart runs both at once
FAULT_STEPS: dict[str, tuple[str, str]] = {"kill": ("kill", "start"), "stop": ("stop", "start"),
                                           "pause": ("pause", "resume"), "restart": ("stop", "start")}

LOCAL_HOST = "localhost"
MAX_LOCAL_NODES = 9                       # cluster.sh MAX_NODES
_LOCAL = re.compile(r"^rabbit-([1-9])(?:@localhost)?$")


def local_node_names(n: int) -> tuple[str, ...]:
    """The short names (rabbit-1 … rabbit-n) a workload uses for the local cluster's nodes."""
    return tuple(f"rabbit-{i}" for i in range(1, min(n, MAX_LOCAL_NODES) + 1))


def local_index(node: str) -> int | None:
    """i for rabbit-i or rabbit-i@localhost; None for any other name."""
    match = _LOCAL.match(node)
    return int(match.group(1)) if match else None


def is_loopback_host(host: str) -> bool:
    """A host name that can only mean this machine (no DNS lookup: validation stays offline)."""
    import socket

    return host in ("localhost", "::1", socket.gethostname()) or host.startswith("127.")
