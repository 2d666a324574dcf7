"""What a cluster's run was measured on: the broker's product, version, Erlang, nodes and feature flags.

A figure means little without the broker behind it: RabbitMQ 4.0 on Erlang 27 and 3.10 on Erlang 25
are different systems, and the metadata store (Mnesia, or Khepri when the ``khepri_db`` feature flag
is on) changes what queue churn costs. The coordinator reads these facts once, after the broker probe
(rbench.coordinator.broker_identity.read_broker_facts), and run.json keeps them per cluster
(``clusters[].broker``), so the summary, the report, the leaderboard and the history name the broker
from the run itself instead of from what the reader assumes. ``source`` says where they were read:
a fact a door did not give is None, never guessed.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rbench.samples.fields import Fields

KHEPRI_FLAG = "khepri_db"


@dataclass(frozen=True)
class FeatureFlag:
    """One feature flag as the management API lists it (/api/feature-flags)."""

    name: str
    state: str                      # enabled, disabled, state_changing

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state}

    @classmethod
    def from_json(cls, data: object, where: str) -> FeatureFlag:
        f = Fields(data, where)
        return cls(name=f.text("name"), state=f.text("state"))


@dataclass(frozen=True)
class DeprecatedFeature:
    """One deprecated feature and its phase as the broker states it (/api/deprecated-features, RabbitMQ ≥ 3.13):
    permitted_by_default, denied_by_default, disconnected or removed."""

    name: str
    phase: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "phase": self.phase}

    @classmethod
    def from_json(cls, data: object, where: str) -> DeprecatedFeature:
        f = Fields(data, where)
        return cls(name=f.text("name"), phase=f.text("phase"))


@dataclass(frozen=True)
class NodeFds:
    """One node's file-descriptor room before the run, as /api/nodes states it: RabbitMQ holds one descriptor per
    connection and reads its limit at boot (3.10: fd_total and sockets_total, the part of it connections may
    use; 4.0: fd_total, sockets_total 0). The pre-run check (rbench.coordinator.broker_room) reads it."""

    node: str
    fd_total: int | None
    fd_used: int | None
    sockets_total: int | None         # None or 0 where the broker does not count sockets apart (4.0)
    sockets_used: int | None

    def room(self) -> tuple[int, str] | None:
        """(connections this node can still take, which counter said so); None when it states no limit."""
        if self.sockets_total:
            return self.sockets_total - (self.sockets_used or 0), f"sockets_total {self.sockets_total:,}"
        if self.fd_total:
            return self.fd_total - (self.fd_used or 0), f"fd_total {self.fd_total:,}, {self.fd_used or 0:,} in use"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "fd_total": self.fd_total, "fd_used": self.fd_used,
                "sockets_total": self.sockets_total, "sockets_used": self.sockets_used}

    @classmethod
    def from_json(cls, data: object, where: str) -> NodeFds:
        f = Fields(data, where)
        return cls(node=f.text("node"), fd_total=f.opt_int("fd_total"), fd_used=f.opt_int("fd_used"),
                   sockets_total=f.opt_int("sockets_total"), sockets_used=f.opt_int("sockets_used"))


@dataclass(frozen=True)
class BrokerFacts:
    """One cluster's broker, as read before the run; None (or ``feature_flags`` None) where no door said."""

    product: str | None = None
    version: str | None = None
    erlang: str | None = None                     # Erlang/OTP version, e.g. 27.3.4.1
    cluster_name: str | None = None
    nodes: tuple[str, ...] = ()                   # every node the management API lists (else the one that answered)
    feature_flags: tuple[FeatureFlag, ...] | None = None      # None: not read (no management API)
    deprecated_features: tuple[DeprecatedFeature, ...] | None = None   # None: not read, or the broker has none (< 3.13)
    max_message_size: int | None = None           # bytes, when the broker exposes it (RabbitMQ 3.10 and 4.0 do not)
    source: str | None = None                     # where these were read: "management API …" / "AMQP server properties"
    node_fds: tuple[NodeFds, ...] | None = None   # each node's fd room before the run; None: not read (no management API)
    extra: Mapping[str, Any] = field(default_factory=dict)

    JSON_KEYS: ClassVar[tuple[str, ...]] = (
        "product", "version", "erlang", "cluster_name", "nodes", "feature_flags", "metadata_store",
        "deprecated_features", "max_message_size", "source", "node_fds")

    @property
    def metadata_store(self) -> str | None:
        """'khepri' when the khepri_db flag is enabled, 'mnesia' when the flags were read and it is not; None unread."""
        if self.feature_flags is None:
            return None
        return "khepri" if self.flag_state(KHEPRI_FLAG) == "enabled" else "mnesia"

    def flag_state(self, name: str) -> str | None:
        """The state of feature flag ``name``; None when the flags were not read or the broker has no such flag."""
        return next((f.state for f in self.feature_flags or () if f.name == name), None)

    def enabled_flags(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.feature_flags or () if f.state == "enabled")

    def deprecation_phase(self, name: str) -> str | None:
        return next((d.phase for d in self.deprecated_features or () if d.name == name), None)

    def version_tuple(self) -> tuple[int, ...]:
        """(4, 0, 5) from "4.0.5"; () when unknown (a pre-release suffix is dropped: "4.1.0-rc.1" → (4, 1, 0))."""
        out = []
        for part in (self.version or "").split("-")[0].split("."):
            if not part.isdigit():
                break
            out.append(int(part))
        return tuple(out)

    def transient_queues_removed(self) -> bool:
        """True where a transient non-exclusive queue is refused: RabbitMQ 4.3 and later, or wherever the broker says
        its deprecated feature transient_nonexcl_queues is past being permitted."""
        return transient_queues_removed(self.version_tuple(), self.deprecation_phase("transient_nonexcl_queues"))

    def line(self) -> str:
        """'RabbitMQ 4.0.5 (Erlang 27.3.4.1), cluster rabbit4@vm, node rabbit4@localhost, khepri_db off'."""
        head = f"{self.product or 'RabbitMQ'} {self.version or '(version unknown)'}"
        if self.erlang:
            head += f" (Erlang {self.erlang})"
        parts = [head]
        if self.cluster_name:
            parts.append(f"cluster {self.cluster_name}")
        if self.nodes:
            parts.append(("node " if len(self.nodes) == 1 else "nodes ") + ", ".join(self.nodes))
        khepri = self.flag_state(KHEPRI_FLAG)
        if self.feature_flags is None:
            parts.append("feature flags not read (no management API of this broker answered)")
        elif khepri is not None:
            parts.append(f"{KHEPRI_FLAG} {'on' if khepri == 'enabled' else 'off'}")
        else:
            parts.append(f"Mnesia (no {KHEPRI_FLAG} flag)")
        return ", ".join(parts)

    def short(self) -> str:
        """'RabbitMQ 4.0.5' (the history's and the leaderboard's column)."""
        return f"{self.product or 'RabbitMQ'} {self.version or '?'}"

    def to_json(self) -> dict[str, Any]:
        return {"product": self.product, "version": self.version, "erlang": self.erlang,
                "cluster_name": self.cluster_name, "nodes": list(self.nodes),
                "feature_flags": None if self.feature_flags is None else [f.to_json() for f in self.feature_flags],
                "metadata_store": self.metadata_store,           # derived; written for people and other tools
                "deprecated_features": (None if self.deprecated_features is None
                                        else [d.to_json() for d in self.deprecated_features]),
                "max_message_size": self.max_message_size, "source": self.source,
                "node_fds": None if self.node_fds is None else [n.to_json() for n in self.node_fds], **self.extra}

    @classmethod
    def from_json(cls, data: object, where: str) -> BrokerFacts:
        f = Fields(data, where)
        flags = None if f.data.get("feature_flags") is None else tuple(
            FeatureFlag.from_json(e, w) for w, e in f.entries("feature_flags"))
        deprecated = None if f.data.get("deprecated_features") is None else tuple(
            DeprecatedFeature.from_json(e, w) for w, e in f.entries("deprecated_features"))
        node_fds = None if f.data.get("node_fds") is None else tuple(
            NodeFds.from_json(e, w) for w, e in f.entries("node_fds"))
        return cls(product=f.opt_text("product"), version=f.opt_text("version"), erlang=f.opt_text("erlang"),
                   cluster_name=f.opt_text("cluster_name"), nodes=f.texts("nodes"), feature_flags=flags,
                   deprecated_features=deprecated, max_message_size=f.opt_int("max_message_size"),
                   source=f.opt_text("source"), node_fds=node_fds, extra=f.extra(cls.JSON_KEYS))


TRANSIENT_QUEUES_REMOVED_IN = (4, 3)
REFUSING_PHASES = ("denied_by_default", "disconnected", "removed")


def transient_queues_removed(version: tuple[int, ...], phase: str | None = None) -> bool:
    """Whether a broker of ``version`` (deprecation ``phase`` of transient_nonexcl_queues, when it says) refuses
    transient non-exclusive queues: the one rule rbench's declarers ask before declaring one."""
    return phase in REFUSING_PHASES or bool(version) and version >= TRANSIENT_QUEUES_REMOVED_IN
