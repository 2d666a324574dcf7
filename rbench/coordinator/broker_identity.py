"""Which broker answered: its version, cluster name, node and feature flags, from each endpoint a run uses.

A run talks to a cluster on several doors: AMQP (or streams) for the load, the management API and the
Prometheus endpoint for the broker sampler. They are configured apart, and the sampler's defaults are a
guess (the AMQP host at 15672 and 15692, unless the broker lists its own: rbench.coordinator.broker_endpoints),
so a run against a second broker on the same host (RabbitMQ 4.0 on 5680 beside 3.10 on 5672) used to sample
the other broker's memory and CPU without a word. Each
door says who it is (AMQP server properties, /api/overview, ``rabbitmq_identity_info``); comparing their
cluster names before the run turns that silent mix-up into one line naming both brokers. The same facts
(version, feature flags such as ``khepri_db``) are what run.json, the report and the history record.
"""
from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO

from rbench.config.uri import mask_uri
from rbench.errors import ConfigError

if TYPE_CHECKING:
    from rbench.config.model import BrokerMetrics, Cluster, Workload

HTTP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class BrokerIdentity:
    """What one endpoint says about the broker behind it; None where that endpoint does not say."""

    cluster_name: str | None
    version: str | None = None
    product: str | None = None
    node: str | None = None
    platform: str | None = None
    feature_flags: tuple[str, ...] = field(default=())     # the enabled ones, sorted (management only)
    # every AMQP listener of the cluster, (node, ip, port), as the management API lists them (management only)
    amqp_listeners: tuple[tuple[str, str, int], ...] = field(default=())

    def describe(self) -> str:
        """'cluster rabbit4@vm (RabbitMQ 4.0.5, node rabbit4@localhost)', from what is known."""
        extra = ", ".join(x for x in (f"{self.product or 'RabbitMQ'} {self.version}" if self.version else None,
                                      f"node {self.node}" if self.node else None) if x)
        return f"cluster {self.cluster_name or '?'}" + (f" ({extra})" if extra else "")

    def to_json(self) -> dict[str, Any]:
        return {"cluster_name": self.cluster_name, "version": self.version, "product": self.product, "node": self.node,
                "platform": self.platform, "feature_flags": list(self.feature_flags),
                "amqp_listeners": [list(x) for x in self.amqp_listeners]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BrokerIdentity:
        return cls(cluster_name=_str(data.get("cluster_name")), version=_str(data.get("version")),
                   product=_str(data.get("product")), node=_str(data.get("node")), platform=_str(data.get("platform")),
                   feature_flags=tuple(str(f) for f in data.get("feature_flags") or ()),
                   amqp_listeners=tuple((str(n), str(ip), int(port)) for n, ip, port in data.get("amqp_listeners") or ()))

    def merged(self, other: BrokerIdentity) -> BrokerIdentity:
        """This identity with the gaps filled from ``other`` (the same broker seen from another door)."""
        return BrokerIdentity(self.cluster_name or other.cluster_name, self.version or other.version,
                              self.product or other.product, self.node or other.node, self.platform or other.platform,
                              self.feature_flags or other.feature_flags, self.amqp_listeners or other.amqp_listeners)

    def listener_of(self, door: str, via: str) -> str | None:
        """The node of this cluster whose AMQP listener is ``door``'s host and port, as seen through the endpoint
        ``via`` (None: none is, or it cannot be known).

        Why: a cluster whose cluster_name was never set reports each node's own name as the cluster's (4.0:
        ``rabbit4-2@host`` from node 2), so names alone would call a cluster's own nodes another broker. A
        listener on every address (``::``) says only its port, so it vouches for ``door`` when ``via`` is on
        door's host (the endpoint and the door are one machine, and one port there is one process)."""
        door_host, door_port = _host_port(door, 5671 if door.startswith("amqps") else 5672)
        via_host, _ = _host_port(via, 0)
        if not door_host or door_port is None:
            return None
        loopback = ("127.0.0.1", "::1", "localhost")
        same_machine = via_host == door_host or (via_host in loopback and door_host in loopback)
        for node, ip, port in self.amqp_listeners:
            if port != door_port:
                continue
            if ip == door_host or (ip in loopback and door_host in loopback) or (ip in ("::", "0.0.0.0") and same_machine):
                return node
        return None


def _host_port(url: str, default_port: int) -> tuple[str, int | None]:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        return parts.hostname or "", parts.port or default_port
    except ValueError:
        return "", None


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def from_server_properties(props: Mapping[str, Any]) -> BrokerIdentity:
    """What a connection's server properties say (AMQP 0.9.1 connection.start, stream peer properties, AMQP 1.0
    open: RabbitMQ sends cluster_name, version, product, platform; 4.0's AMQP 1.0 also its node)."""
    return BrokerIdentity(cluster_name=_str(props.get("cluster_name")), version=_str(props.get("version")),
                          product=_str(props.get("product")), node=_str(props.get("node")),
                          platform=_str(props.get("platform")))


def http_get(url: str, headers: Mapping[str, str], timeout_s: float) -> bytes:
    req = urllib.request.Request(url, headers=dict(headers))
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        body: bytes = resp.read()
        return body


def from_management(base: str, authorization: str, timeout_s: float = HTTP_TIMEOUT_S) -> BrokerIdentity:
    """/api/overview (version, cluster name, the node that answered) and /api/feature-flags (enabled names).

    Raises OSError/ValueError as urllib and json do: the caller decides whether a silent door is an error."""
    headers = {"Authorization": authorization}
    overview = json.loads(http_get(f"{base.rstrip('/')}/overview", headers, timeout_s))
    flags: tuple[str, ...] = ()
    try:
        listed = json.loads(http_get(f"{base.rstrip('/')}/feature-flags", headers, timeout_s))
        flags = tuple(sorted(str(f["name"]) for f in listed if isinstance(f, dict) and f.get("state") == "enabled"))
    except (OSError, ValueError, KeyError):
        pass                     # older brokers, or a user without the monitoring tag: the identity still stands
    listeners = tuple(sorted((str(x.get("node")), str(x.get("ip_address")), int(x["port"]))
                             for x in overview.get("listeners") or () if isinstance(x, dict) and "port" in x
                             and str(x.get("protocol", "")) in ("amqp", "amqp/ssl")))
    return BrokerIdentity(cluster_name=_str(overview.get("cluster_name")), version=_str(overview.get("rabbitmq_version")),
                          product=_str(overview.get("product_name")), node=_str(overview.get("node")),
                          platform=_str(overview.get("erlang_full_version")), feature_flags=flags,
                          amqp_listeners=listeners)


def from_prometheus_text(text: str) -> BrokerIdentity | None:
    """``rabbitmq_identity_info{rabbitmq_node=…, rabbitmq_cluster=…}`` of a /metrics page; None without it."""
    from rbench.coordinator.broker import parse_prometheus

    for name, labels, _ in parse_prometheus(text):
        if name == "rabbitmq_identity_info":
            return BrokerIdentity(cluster_name=labels.get("rabbitmq_cluster"), node=labels.get("rabbitmq_node"))
    return None


def from_prometheus(url: str, timeout_s: float = HTTP_TIMEOUT_S) -> BrokerIdentity | None:
    return from_prometheus_text(http_get(url, {}, timeout_s).decode())


def check_same_broker(load: BrokerIdentity, load_door: str, seen: BrokerIdentity, seen_door: str, setting: str,
                      members: frozenset[str] = frozenset()) -> None:
    """ConfigError, one line naming both, when ``seen_door`` answers for another cluster than ``load_door``.

    Cluster names are compared (every node of a named cluster reports the same one); an endpoint that does
    not say is given the benefit of the doubt: nothing to compare is not a mismatch. Names that differ are
    still one cluster when the seen door's cluster lists an AMQP listener on the load's host and port (a
    management API), or when its node is one of ``members`` (the nodes of the load's cluster, as such a
    management API listed them): an unnamed cluster's nodes each report their own name."""
    if load.cluster_name is None or seen.cluster_name is None or load.cluster_name == seen.cluster_name:
        return
    if seen.listener_of(load_door, seen_door) is not None or (seen.node is not None and seen.node in members):
        return
    raise ConfigError(f"{setting}: {mask_uri(seen_door)} answers for {seen.describe()}, but the load goes to "
                      f"{mask_uri(load_door)}, "
                      f"{load.describe()}: the sampler would measure another broker; set {setting} to that broker's "
                      f"endpoints")


def check_sampled_brokers(workload: Workload, answered: Mapping[str, BrokerIdentity],
                          out: TextIO | None = None) -> Workload:
    """Before a run: the management and Prometheus endpoints the broker sampler will read must answer for the
    cluster the load goes to (the AMQP host at the default ports once sampled RabbitMQ 3.10 beside a run
    against 4.0, silently). ``answered``: who the broker probe reached, per cluster
    (rbench.coordinator.run.probe_clusters). Returns the workload to run.

    Endpoints the workload names (``broker_metrics.management_urls`` / ``prometheus_urls``, the workload's
    or the cluster's own) that answer for another cluster are a ConfigError naming both. Guessed ones (the
    ports, default or set; off the standard AMQP port rbench.coordinator.broker_endpoints asks the broker
    first and guesses only when that finds nothing) are left out of this run's sampling with one warning line
    naming both brokers and the settings that fix it, rather than failing a run that did not choose them: out
    of the workload's ``broker_metrics`` when the cluster uses those, else out of the cluster's own. An
    endpoint that does not answer is left to the sampler, which warns once and samples without it; a cluster
    the probe did not identify (reached only over streams) has nothing to compare with."""
    shared: set[str] = set()
    clusters = list(workload.clusters)
    for i, cluster in enumerate(workload.clusters):
        cfg = workload.broker_metrics_of(cluster)
        load = answered.get(cluster.name)
        if not cfg.enabled or not cluster.uris or load is None:
            continue
        own = cluster.broker_metrics is not None
        dropped = _check_cluster(cluster, load, cfg, shared if not own else set(), out)
        if own and dropped:
            clusters[i] = cluster.model_copy(update={"broker_metrics": _without(cfg, dropped)})
        elif not own:
            shared |= dropped
    update: dict[str, object] = {}       # a pydantic model_copy update, not run.json
    if shared:
        update.update(broker_metrics=_without(workload.broker_metrics, shared))
    if clusters != list(workload.clusters):
        update.update(clusters=clusters)
    return workload.model_copy(update=update) if update else workload


def _without(cfg: BrokerMetrics, dropped: set[str]) -> BrokerMetrics:
    """``cfg`` without the sources in ``dropped``: the one left, or sampling off."""
    kept = [s for s in ("management", "prometheus") if cfg.source in (s, "both") and s not in dropped]
    update: dict[str, object] = {"source": kept[0]} if kept else {"enabled": False}
    return cfg.model_copy(update=update)


def _check_cluster(cluster: Cluster, load: BrokerIdentity, cfg: BrokerMetrics, warned: set[str],
                   out: TextIO | None) -> set[str]:
    """The sources of ``cfg`` whose guessed endpoints answer for another broker than ``cluster``'s load (warned
    once per source: ``warned`` holds those already said); a named one that does is a ConfigError."""
    from rbench.coordinator.broker_endpoints import authorization, sampled_endpoints

    dropped: set[str] = set()
    management, prometheus = sampled_endpoints(cluster.uris, cfg)
    auth = authorization(cluster.uris)
    doors: list[tuple[str, str, bool, Callable[[str], BrokerIdentity | None]]] = []
    if cfg.source in ("management", "both"):
        by_management = partial(from_management, authorization=auth)
        doors += [("management", u, bool(cfg.management_urls), by_management) for u in management]
    if cfg.source in ("prometheus", "both"):
        doors += [("prometheus", u, bool(cfg.prometheus_urls), from_prometheus) for u in prometheus]
    seen_at: list[tuple[str, str, bool, BrokerIdentity]] = []
    for source, url, named, identify in doors:
        try:
            seen = identify(url)
        except (OSError, ValueError):
            continue
        if seen is not None:
            seen_at.append((source, url, named, seen))
    # the load cluster's nodes, from any management API that lists the load's own AMQP listener: they vouch
    # for the cluster's other endpoints when its nodes each report their own cluster name (never named)
    members = frozenset(node for _, url, _, seen in seen_at if seen.listener_of(cluster.uris[0], url) is not None
                        for node, _, _ in seen.amqp_listeners)
    for source, url, named, seen in seen_at:
        try:
            check_same_broker(load, cluster.uris[0], seen, url, f"broker_metrics.{source}_urls", members)
        except ConfigError as exc:
            if named:
                raise ConfigError(f"cluster {cluster.name}: {exc}") from None
            if source not in dropped and source not in warned:
                print(f"rbench: warning: cluster {cluster.name}: {exc} (rbench perftest: --{source}-uri); "
                      f"not sampling {source} in this run",
                      file=out or sys.stderr, flush=True)
            dropped.add(source)
    return dropped
