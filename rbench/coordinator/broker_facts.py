"""Reading what each cluster's run is measured on (rbench.samples.broker_facts), once, after the broker probe.

The probe's own connection already said the product, version, platform and cluster name; the management
API adds what only it knows: every node, the Erlang version, the feature flags (``khepri_db``: which
metadata store) and, on RabbitMQ ≥ 3.13, the deprecated features and their phase, which the 4.0 rules
(rbench.coordinator.broker_limits) read instead of assuming them from the version. Only a management
endpoint that answers for the probed cluster is believed (the sampler's default endpoint guess can reach
another broker on the same host: rbench.coordinator.broker_identity); without one the facts are the
probe's alone and say so (``feature_flags`` None, ``source`` the connection).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rbench.config.uri import mask_uri
from rbench.coordinator.broker_identity import HTTP_TIMEOUT_S, BrokerIdentity, http_get
from rbench.samples.broker_facts import BrokerFacts, DeprecatedFeature, FeatureFlag, NodeFds

if TYPE_CHECKING:
    from rbench.config.model import Workload

PROBE_SOURCE = "the probe's connection (server properties)"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _erlang(platform: str | None) -> str | None:
    """'27.3.4.1' from the server properties' platform 'Erlang/OTP 27.3.4.1'."""
    if platform and platform.startswith("Erlang/OTP "):
        return platform.removeprefix("Erlang/OTP ").split()[0]
    return None


def from_identity(identity: BrokerIdentity) -> BrokerFacts:
    """The facts a connection's server properties give (no flags, no node list)."""
    return BrokerFacts(product=identity.product, version=identity.version, erlang=_erlang(identity.platform),
                       cluster_name=identity.cluster_name, nodes=(identity.node,) if identity.node else (),
                       source=PROBE_SOURCE)


def _max_message_size(overview: Mapping[str, Any], nodes: list[Any]) -> int | None:
    """``max_message_size`` where a broker's management API lists it (neither 3.10 nor 4.0 does today)."""
    for doc in (overview, *(n for n in nodes if isinstance(n, Mapping))):
        value = doc.get("max_message_size")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _node_fds(nodes: list[Any]) -> tuple[NodeFds, ...] | None:
    """Each running node's fd_total/fd_used/sockets_total/sockets_used (None when /api/nodes gave no node)."""
    out = tuple(NodeFds(node=str(n["name"]), fd_total=_count(n.get("fd_total")), fd_used=_count(n.get("fd_used")),
                        sockets_total=_count(n.get("sockets_total")), sockets_used=_count(n.get("sockets_used")))
                for n in nodes if isinstance(n, Mapping) and n.get("name") and n.get("running", True))
    return out or None


def from_management(base: str, authorization: str, timeout_s: float = HTTP_TIMEOUT_S) -> BrokerFacts:
    """/api/overview, /api/nodes, /api/feature-flags and /api/deprecated-features of one management endpoint.

    OSError/ValueError from /api/overview propagate (the endpoint did not answer); the others are optional
    (a user without the monitoring tag, a broker older than the endpoint): what they would say stays None."""
    root = base.rstrip("/")
    headers = {"Authorization": authorization}

    def get(path: str) -> Any:
        return json.loads(http_get(f"{root}/{path}", headers, timeout_s))

    def optional(path: str) -> list[Any] | None:
        try:
            value = get(path)
        except (OSError, ValueError):
            return None
        return value if isinstance(value, list) else None

    overview = get("overview")
    if not isinstance(overview, Mapping):
        raise ValueError(f"{root}/overview: not a JSON object")
    nodes = optional("nodes") or []
    listed = optional("feature-flags")
    deprecated = optional("deprecated-features")
    names = tuple(sorted(str(n["name"]) for n in nodes if isinstance(n, Mapping) and n.get("name")))
    node = _text(overview.get("node"))
    return BrokerFacts(
        product=_text(overview.get("product_name")), version=_text(overview.get("rabbitmq_version")),
        erlang=_text(overview.get("erlang_version")), cluster_name=_text(overview.get("cluster_name")),
        nodes=names or ((node,) if node else ()),
        feature_flags=None if listed is None else tuple(
            FeatureFlag(str(f["name"]), str(f.get("state"))) for f in listed if isinstance(f, Mapping) and "name" in f),
        deprecated_features=None if deprecated is None else tuple(
            DeprecatedFeature(str(d["name"]), str(d.get("deprecation_phase"))) for d in deprecated
            if isinstance(d, Mapping) and "name" in d),
        max_message_size=_max_message_size(overview, nodes), source=f"management API {mask_uri(root)}",
        node_fds=_node_fds(nodes))


def read_broker_facts(workload: Workload, answered: Mapping[str, BrokerIdentity]) -> dict[str, BrokerFacts]:
    """Per cluster the probe reached: the first management endpoint (the sampler's, named or guessed) that
    answers for that cluster, else the probe's own facts. Never raises for a silent endpoint: the facts are
    a record of the run, and the sampler's check has already refused an endpoint named wrong."""
    from rbench.coordinator.broker_endpoints import authorization, sampled_endpoints

    out: dict[str, BrokerFacts] = {}
    for cluster in workload.clusters:
        probed = answered.get(cluster.name)
        if probed is None:
            continue
        facts = from_identity(probed)
        if cluster.uris:
            management, _ = sampled_endpoints(cluster.uris, workload.broker_metrics_of(cluster))
            auth = authorization(cluster.uris)
            for url in management:
                try:
                    read = from_management(url, auth)
                except (OSError, ValueError):
                    continue
                if probed.cluster_name is None or read.cluster_name in (None, probed.cluster_name):
                    facts = read
                    break
        out[cluster.name] = facts
    return out
