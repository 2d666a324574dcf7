"""Which broker answered: its version, cluster name, node and feature flags, from each endpoint a run uses.

A run talks to a cluster on several doors: AMQP (or streams) for the load, the management API and the
Prometheus endpoint for the broker sampler. They are configured apart, and the sampler's defaults are a
guess (the AMQP host at 15672 and 15692), so a run against a second broker on the same host (RabbitMQ
4.0 on 5680 beside 3.10 on 5672) used to sample the other broker's memory and CPU without a word. Each
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
    from rbench.config.model import Workload

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

    def describe(self) -> str:
        """'cluster rabbit4@vm (RabbitMQ 4.0.5, node rabbit4@localhost)', from what is known."""
        extra = ", ".join(x for x in (f"{self.product or 'RabbitMQ'} {self.version}" if self.version else None,
                                      f"node {self.node}" if self.node else None) if x)
        return f"cluster {self.cluster_name or '?'}" + (f" ({extra})" if extra else "")

    def to_json(self) -> dict[str, Any]:
        return {"cluster_name": self.cluster_name, "version": self.version, "product": self.product, "node": self.node,
                "platform": self.platform, "feature_flags": list(self.feature_flags)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BrokerIdentity:
        return cls(cluster_name=_str(data.get("cluster_name")), version=_str(data.get("version")),
                   product=_str(data.get("product")), node=_str(data.get("node")), platform=_str(data.get("platform")),
                   feature_flags=tuple(str(f) for f in data.get("feature_flags") or ()))

    def merged(self, other: BrokerIdentity) -> BrokerIdentity:
        """This identity with the gaps filled from ``other`` (the same broker seen from another door)."""
        return BrokerIdentity(self.cluster_name or other.cluster_name, self.version or other.version,
                              self.product or other.product, self.node or other.node, self.platform or other.platform,
                              self.feature_flags or other.feature_flags)


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def from_server_properties(props: Mapping[str, Any]) -> BrokerIdentity:
    """The AMQP 0.9.1 connection.start server properties (RabbitMQ sends cluster_name, version, product)."""
    return BrokerIdentity(cluster_name=_str(props.get("cluster_name")), version=_str(props.get("version")),
                          product=_str(props.get("product")), platform=_str(props.get("platform")))


def _get(url: str, headers: Mapping[str, str], timeout_s: float) -> bytes:
    req = urllib.request.Request(url, headers=dict(headers))
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        body: bytes = resp.read()
        return body


def from_management(base: str, authorization: str, timeout_s: float = HTTP_TIMEOUT_S) -> BrokerIdentity:
    """/api/overview (version, cluster name, the node that answered) and /api/feature-flags (enabled names).

    Raises OSError/ValueError as urllib and json do: the caller decides whether a silent door is an error."""
    headers = {"Authorization": authorization}
    overview = json.loads(_get(f"{base.rstrip('/')}/overview", headers, timeout_s))
    flags: tuple[str, ...] = ()
    try:
        listed = json.loads(_get(f"{base.rstrip('/')}/feature-flags", headers, timeout_s))
        flags = tuple(sorted(str(f["name"]) for f in listed if isinstance(f, dict) and f.get("state") == "enabled"))
    except (OSError, ValueError, KeyError):
        pass                     # older brokers, or a user without the monitoring tag: the identity still stands
    return BrokerIdentity(cluster_name=_str(overview.get("cluster_name")), version=_str(overview.get("rabbitmq_version")),
                          product=_str(overview.get("product_name")), node=_str(overview.get("node")),
                          platform=_str(overview.get("erlang_full_version")), feature_flags=flags)


def from_prometheus_text(text: str) -> BrokerIdentity | None:
    """``rabbitmq_identity_info{rabbitmq_node=…, rabbitmq_cluster=…}`` of a /metrics page; None without it."""
    from rbench.coordinator.broker import parse_prometheus

    for name, labels, _ in parse_prometheus(text):
        if name == "rabbitmq_identity_info":
            return BrokerIdentity(cluster_name=labels.get("rabbitmq_cluster"), node=labels.get("rabbitmq_node"))
    return None


def from_prometheus(url: str, timeout_s: float = HTTP_TIMEOUT_S) -> BrokerIdentity | None:
    return from_prometheus_text(_get(url, {}, timeout_s).decode())


def check_same_broker(load: BrokerIdentity, load_door: str, seen: BrokerIdentity, seen_door: str, setting: str) -> None:
    """ConfigError, one line naming both, when ``seen_door`` answers for another cluster than ``load_door``.

    Cluster names are compared (every node of a cluster reports the same one); an endpoint that does not
    say is given the benefit of the doubt: nothing to compare is not a mismatch."""
    if load.cluster_name is None or seen.cluster_name is None or load.cluster_name == seen.cluster_name:
        return
    raise ConfigError(f"{setting}: {mask_uri(seen_door)} answers for {seen.describe()}, but the load goes to "
                      f"{mask_uri(load_door)}, "
                      f"{load.describe()}: the sampler would measure another broker; set {setting} to that broker's "
                      f"endpoints")


async def _amqp_identity(uris: tuple[str, ...]) -> BrokerIdentity:
    from rbench.drivers.amqp091_connect import connect

    conn = await connect(uris, timeout=HTTP_TIMEOUT_S)
    try:
        return from_server_properties(conn.server_properties)
    finally:
        await conn.close()


def check_sampled_brokers(workload: Workload, out: TextIO | None = None) -> Workload:
    """Before a run: the management and Prometheus endpoints the broker sampler will read must answer for the
    cluster the load goes to (the AMQP host at the default ports once sampled RabbitMQ 3.10 beside a run
    against 4.0, silently). Returns the workload to run.

    Endpoints the workload names (``broker_metrics.management_urls`` / ``prometheus_urls``) that answer for
    another cluster are a ConfigError naming both. Guessed ones (the defaults) are left out of this run's
    sampling with one warning line naming both brokers and the setting that fixes it, rather than failing
    a command that cannot name them (rbench perftest has no flag for them yet). An endpoint that does not
    answer is left to the sampler, which warns once and samples without it; a cluster reached only over
    streams has no AMQP identity to compare with."""
    import asyncio

    from rbench.coordinator.broker import authorization, sampled_endpoints

    cfg = workload.broker_metrics
    if not cfg.enabled:
        return workload
    dropped: set[str] = set()
    for cluster in workload.clusters:
        if not cluster.uris:
            continue
        load = asyncio.run(_amqp_identity(tuple(cluster.uris)))
        management, prometheus = sampled_endpoints(cluster.uris, cfg)
        auth = authorization(cluster.uris)
        doors: list[tuple[str, str, bool, Callable[[str], BrokerIdentity | None]]] = []
        if cfg.source in ("management", "both"):
            by_management = partial(from_management, authorization=auth)
            doors += [("management", u, bool(cfg.management_urls), by_management) for u in management]
        if cfg.source in ("prometheus", "both"):
            doors += [("prometheus", u, bool(cfg.prometheus_urls), from_prometheus) for u in prometheus]
        for source, url, named, identify in doors:
            try:
                seen = identify(url)
            except (OSError, ValueError):
                continue
            if seen is None:
                continue
            try:
                check_same_broker(load, cluster.uris[0], seen, url, f"broker_metrics.{source}_urls")
            except ConfigError as exc:
                if named:
                    raise ConfigError(f"cluster {cluster.name}: {exc}") from None
                if source not in dropped:
                    dropped.add(source)
                    print(f"rbench: warning: cluster {cluster.name}: {exc}; not sampling {source} in this run",
                          file=out or sys.stderr, flush=True)
    if not dropped:
        return workload
    kept = [s for s in ("management", "prometheus") if cfg.source in (s, "both") and s not in dropped]
    update: dict[str, object] = {"source": kept[0]} if kept else {"enabled": False}
    return workload.model_copy(update={"broker_metrics": cfg.model_copy(update=update)})
