"""Where a broker's management API and Prometheus endpoint are, asked of the broker that serves the load's port.

The sampler's defaults (the AMQP host at 15672 and 15692) are right for a broker on the standard ports
and wrong for a second broker on the same host: RabbitMQ 4.0 on 5680 beside 3.10 on 5672 answered the
guess with 3.10's figures. Nothing the broker sends on an AMQP or stream connection names its other
listeners (connection.start's server properties carry product, version, platform and cluster name, no
ports), but the management API does: ``/api/overview`` lists every listener of every node, with its
node, protocol and port. So when the load's port is not the protocol's standard one and the workload
names no endpoint (nor a port), the management API is looked for where the broker is:

* the management URLs the workload names, if any (to find the Prometheus port);
* on this host, the process that listens on the load's port (``/proc/net/tcp`` → socket inode →
  ``/proc/PID/fd``) listens on the broker's other ports too: each is asked ``GET /api/overview``,
  nearest the guessed management port first (which asks the HTTP listeners before the stream and
  distribution ports, where a request would only time out); the first that qualifies wins;
* then the guessed port (a remote broker whose management API is at the standard port);
* an answer counts only when its ``listeners`` include the load's port (protocol amqp or stream):
  a management API of another broker never qualifies, whatever its cluster name;
* the Prometheus endpoint is that node's ``http/prometheus`` listener, from the same list.

Nothing found leaves the guess, which rbench.coordinator.broker_identity checks before the run.
Reading another user's ``/proc/PID/fd`` needs root (or the broker's user): without it only the guessed
port is asked. The same port → process lookup picks the beam of the broker a run loads when several run
on one host (rbench.coordinator.broker.find_beam).
"""
from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import socket
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rbench.config.model import BrokerMetrics

# the ports a RabbitMQ client uses without being told: the guessed endpoints are right beside these
STANDARD_LOAD_PORTS = frozenset({5672, 5671, 5552, 5551})
LOAD_PROTOCOLS = frozenset({"amqp", "amqp/ssl", "stream", "stream/ssl"})
PROBE_TIMEOUT_S = 2.0
_TCP_LISTEN = "0A"
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


@dataclass(frozen=True)
class Listener:
    """One entry of /api/overview's ``listeners``."""

    node: str
    protocol: str
    port: int


@dataclass(frozen=True)
class FoundEndpoints:
    """The broker's own endpoints for the load's (host, port): the management base and the node's metrics URL."""

    management: str                  # http://HOST:PORT/api
    prometheus: str | None           # http://HOST:PORT/metrics, None when that node lists no Prometheus listener
    node: str


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if len(cols) > 9 and cols[3] == _TCP_LISTEN and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(cols[9])
    return inodes


def _pid_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return inodes


def listening_pid(port: int) -> int | None:
    """The local process listening on TCP ``port``, or None (nobody, or its /proc/PID/fd is not readable)."""
    wanted = _listening_inodes(port)
    if not wanted:
        return None
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _pid_inodes(int(entry)) & wanted:
            return int(entry)
    return None


def listening_ports(pid: int) -> list[int]:
    """Every TCP port process ``pid`` listens on, sorted."""
    mine = _pid_inodes(pid)
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if len(cols) > 9 and cols[3] == _TCP_LISTEN and cols[9] in mine:
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def overview_listeners(base: str, authorization: str, timeout_s: float = PROBE_TIMEOUT_S) -> list[Listener]:
    """/api/overview's listeners at management base ``base``; OSError/ValueError as urllib and json raise."""
    req = urllib.request.Request(f"{base.rstrip('/')}/overview", headers={"Authorization": authorization})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        overview = json.loads(resp.read())
    out = []
    for item in overview.get("listeners") or () if isinstance(overview, dict) else ():
        if isinstance(item, dict) and isinstance(item.get("port"), int):
            out.append(Listener(str(item.get("node")), str(item.get("protocol")), int(item["port"])))
    return out


def serving(listeners: list[Listener], host: str, port: int, base: str) -> FoundEndpoints | None:
    """The endpoints ``listeners`` (read at management ``base``) give for the load's port, if it is among them."""
    node = next((li.node for li in listeners if li.port == port and li.protocol in LOAD_PROTOCOLS), None)
    if node is None:
        return None
    prom = next((li for li in listeners if li.node == node and li.protocol.endswith("/prometheus")), None)
    metrics = None if prom is None else \
        f"{'https' if prom.protocol.startswith('https') else 'http'}://{_netloc(host)}:{prom.port}/metrics"
    return FoundEndpoints(base.rstrip("/"), metrics, node)


def _netloc(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def is_local(host: str) -> bool:
    """Whether ``host`` is this machine (its /proc describes the broker's process)."""
    if host in _LOCAL_HOSTS or host == socket.gethostname():
        return True
    with contextlib.suppress(OSError):
        return socket.gethostbyname(host).startswith("127.")
    return False


def candidate_bases(host: str, port: int, scheme: str, guessed_port: int, named: Sequence[str] = ()) -> list[str]:
    """Management bases to ask, in order (module docstring)."""
    ports: list[int] = []
    if is_local(host):
        pid = listening_pid(port)
        if pid is not None:
            ports = sorted((p for p in listening_ports(pid) if p != port), key=lambda p: (abs(p - guessed_port), p))
    ports += [guessed_port] if guessed_port not in ports else []
    return list(dict.fromkeys([b.rstrip("/") for b in named] + [f"{scheme}://{_netloc(host)}:{p}/api" for p in ports]))


def find_endpoints(host: str, port: int, authorization: str, scheme: str, guessed_port: int,
                   named: Sequence[str] = ()) -> FoundEndpoints | None:
    """The management API and Prometheus endpoint of the broker serving ``host:port`` (module docstring)."""
    for base in candidate_bases(host, port, scheme, guessed_port, named):
        try:
            found = serving(overview_listeners(base, authorization), host, port, base)
        except (OSError, ValueError, http.client.HTTPException):
            continue
        if found is not None:
            return found
    return None


def authorization(uris: Sequence[str]) -> str:
    """The management API's Basic authorization: the first AMQP URI's user and password."""
    from rbench.drivers.amqp091_connect import AmqpUri

    first = AmqpUri(uris[0])
    return "Basic " + base64.b64encode(f"{first.user}:{first.password}".encode()).decode()


def asks_broker(ports: Sequence[int], cfg: BrokerMetrics) -> bool:
    """Whether the defaults are looked for rather than guessed: a list is not named, its port is not set, and a
    load port is not a standard one (beside the standard ports the guess is the broker's own layout)."""
    open_ = [kind for kind in ("management", "prometheus")
             if not getattr(cfg, f"{kind}_urls") and f"{kind}_port" not in cfg.model_fields_set]
    return bool(open_) and any(p not in STANDARD_LOAD_PORTS for p in ports)


def sampled_endpoints(uris: Sequence[str], cfg: BrokerMetrics) -> tuple[list[str], list[str]]:
    """(management API bases, Prometheus URLs) the sampler reads for a cluster: the workload's lists; else, off
    the standard ports, what the broker serving each URI lists (find_endpoints); else each URI host at the
    configured ports (a guess that rbench.coordinator.broker_identity checks before a run)."""
    from rbench.drivers.amqp091_connect import AmqpUri

    parsed = [AmqpUri(u) for u in uris]
    doors = list(dict.fromkeys((u.host, u.port) for u in parsed))
    named_m = [u.rstrip("/") for u in cfg.management_urls or ()]
    found: dict[tuple[str, int], FoundEndpoints] = {}
    if asks_broker([port for _, port in doors], cfg):
        auth = authorization(uris)
        for host, port in doors:
            hit = find_endpoints(host, port, auth, cfg.management_scheme, cfg.management_port, named_m)
            if hit is not None:
                found[(host, port)] = hit
    management, prometheus = [], []
    for host, port in doors:
        hit = found.get((host, port))
        management.append(hit.management if hit and "management_port" not in cfg.model_fields_set else f"{cfg.management_scheme}://{_netloc(host)}:{cfg.management_port}/api")
        prometheus.append(hit.prometheus if hit and hit.prometheus and "prometheus_port" not in cfg.model_fields_set
                          else f"http://{_netloc(host)}:{cfg.prometheus_port}/metrics")
    # one node per Prometheus endpoint; nodes sharing a host on other ports are found above or listed in the workload
    return (named_m or list(dict.fromkeys(management)),
            list(cfg.prometheus_urls) if cfg.prometheus_urls else list(dict.fromkeys(prometheus)))
