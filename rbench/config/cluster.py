"""Where the load goes: a broker cluster, how its faults are executed, and the faults of a run (docs/faults.md)."""
from __future__ import annotations

import string
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from rbench.config.base import DEFAULT_MAX_MESSAGE_SIZE, StrictModel
from rbench.config.durations import Seconds
from rbench.config.observe import BrokerMetrics
from rbench.config.uri import AMQP_SCHEMES, STREAM_SCHEMES, parse_uri
from rbench.config.variants import load_variant
from rbench.errors import ConfigError
from rbench.faults.executor import template_refusal
from rbench.faults.terms import FAULT_VERBS, LOCAL_LAYOUTS, is_loopback_host, layout_of_ports, local_node, local_node_names

FaultAction = Literal["kill", "stop", "pause", "restart"]         # rbench.faults.terms.FAULT_ACTIONS
_NODE_NAME = r"^[A-Za-z0-9_.@:-]+$"


class FaultCommands(StrictModel):
    """Shell command templates of a cluster's fault executor, one per verb (docs/faults.md).

    ``{node}`` is the node's name, ``{cluster}`` the cluster's, and every key a node gives under
    ``fault_control.nodes`` ({host}, {pod} …); values are shell-quoted. ``{{`` and ``}}`` are literal braces."""

    kill: str | None = Field(default=None, description="Crash the node, e.g. ssh {host} sudo pkill -9 -f beam.smp")
    start: str | None = Field(default=None, description="Start the node again (after kill or stop); it must rejoin the cluster.")
    stop: str | None = Field(default=None, description="Stop the node gracefully, e.g. ssh {host} sudo systemctl stop rabbitmq-server")
    pause: str | None = Field(default=None, description="Freeze the node, e.g. ssh {host} sudo pkill -STOP -f beam.smp")
    resume: str | None = Field(default=None, description="Unfreeze a paused node, e.g. ssh {host} sudo pkill -CONT -f beam.smp")

    def templates(self) -> dict[str, str]:
        return {verb: t for verb in FAULT_VERBS if (t := getattr(self, verb)) is not None}


class FaultControl(StrictModel):
    """How a cluster's faults are executed (docs/faults.md): ``local`` (the default; the nodes
    rabbit-1 … rabbit-<nodes> of scripts/cluster.sh on this machine) or, for a real cluster,
    ``{command: {kill: …, start: …}, nodes: …}``: each action is a command the coordinator runs."""

    command: FaultCommands | None = Field(default=None, description="Command templates; absent: local.")
    nodes: list[Annotated[str, Field(pattern=_NODE_NAME)]] | dict[Annotated[str, Field(pattern=_NODE_NAME)], dict[str, str | int]] | None = Field(
        default=None, description="The nodes a fault may name: a list of names, or name → its placeholders ({host: 10.0.0.2}).")
    timeout: Seconds = Field(default=120.0, gt=0, description="A command still running after this long is killed and "
                                                              "logged as a failed action.")

    @model_validator(mode="before")
    @classmethod
    def _local(cls, value: Any) -> Any:
        if value == "local":
            return {}
        if not isinstance(value, dict):
            raise ValueError("expected local, or a mapping with command and nodes")
        return value

    @property
    def local(self) -> bool:
        return self.command is None

    def node_vars(self) -> dict[str, dict[str, str]]:
        if self.nodes is None:
            return {}
        if isinstance(self.nodes, list):
            return {n: {} for n in self.nodes}
        return {n: {k: str(v) for k, v in fields.items()} for n, fields in self.nodes.items()}

    @model_validator(mode="after")
    def _placeholders(self) -> FaultControl:
        """Every placeholder of every template is known for every node, so no command fails to format mid-run."""
        if self.command is None:
            if self.nodes is not None:
                raise ValueError("nodes: only with command (the local cluster's nodes are rabbit-1 … rabbit-<nodes>)")
            return self
        if not self.nodes:
            raise ValueError("nodes: expected the nodes the commands act on (a list of names, or name → placeholders)")
        templates = self.command.templates()
        if not templates:
            raise ValueError("command: expected at least one of " + ", ".join(FAULT_VERBS))
        nodes = self.node_vars()
        for verb, template in templates.items():
            try:
                names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
            except ValueError as exc:
                raise ValueError(f"command.{verb}: {exc} (write {{{{ and }}}} for literal braces)") from None
            if (refusal := template_refusal(template)) is not None:
                raise ValueError(f"command.{verb}: {refusal}")
            for name in names:
                if not name.isidentifier():
                    raise ValueError(f"command.{verb}: expected placeholders such as {{node}} or {{host}}, got {{{name}}}")
                if name in ("node", "cluster"):
                    continue
                missing = [n for n, fields in nodes.items() if name not in fields]
                if missing:
                    raise ValueError(f"nodes: {missing[0]} gives no {name!r}, which command.{verb} uses ({{{name}}})")
        return self


class Cluster(StrictModel):
    """A broker target; node count, instance and volume type feed the cost model."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$",
                      description="Name used in every sample row and in the leaderboards.")
    uris: list[str] = Field(min_length=1, description="AMQP 0.9.1 URIs (amqp:// or amqps://), tried in order.")
    stream_uris: list[str] = Field(default_factory=list,
                                   description="rabbitmq-stream:// URIs; derived from uris (port 5552) when empty.")
    nodes: int = Field(default=1, ge=1, le=10_000)
    instance_type: str = Field(default="local", description="Key of conf/costs.yaml instance_types.")
    volume_type: str = Field(default="local", description="Key of conf/costs.yaml volume_types.")
    volume_gb: int = Field(default=0, ge=0)
    volume_iops: int | None = Field(default=None, ge=0, description="Provisioned IOPS per node; default: the volume type's baseline.")
    max_message_size: int = Field(default=DEFAULT_MAX_MESSAGE_SIZE, ge=1, le=512 * 1024 * 1024,
                                  description="The broker's max_message_size in bytes (RabbitMQ 3.8-3.13 default 128 MiB, "
                                              "4.x 16 MiB, at most 512 MiB); bodies larger than this are refused at validation.")
    fault_control: FaultControl = Field(
        default_factory=FaultControl, description="How the workload's faults act on this cluster: local (the nodes "
                                                  "rabbit-1 … rabbit-<nodes> of scripts/cluster.sh on this machine, rabbit4-1 … on its "
                                                  "RabbitMQ 4.0 cluster) or command templates for a real cluster (docs/faults.md).")
    broker_metrics: BrokerMetrics | None = Field(
        default=None, description="This cluster's broker sampling, in place of the workload's broker_metrics: for "
                                  "brokers whose endpoints differ (RabbitMQ 4.0 on 15680/15780 beside 3.10; docs/broker.md).")
    variant: str | None = Field(
        default=None, description="The broker variant this cluster's URIs reach (conf/variants/NAME.*, started by "
                                  "scripts/variant.sh start NAME): its settings are recorded in run.json "
                                  "clusters[].variant and shown beside the broker (docs/brokers.md).")

    def fault_nodes(self) -> tuple[str, ...]:
        """The node names a fault may give for this cluster (empty: faults cannot reach it)."""
        if self.fault_control.local:
            if not self.local_uris():
                return ()
            layout = self.local_layout()
            layouts = [layout] if layout is not None else list(LOCAL_LAYOUTS)
            return tuple(n for lay in layouts for n in local_node_names(self.nodes, lay))
        return tuple(self.fault_control.node_vars())

    def local_uris(self) -> bool:
        """Every URI names this machine: the local fault executor may act for this cluster."""
        return all(is_loopback_host(parse_uri(u, AMQP_SCHEMES).host) for u in self.uris)

    def local_layout(self) -> str | None:
        """Which of cluster.sh's local clusters the URIs' ports name: "3" (rabbit-i, 5701…) or "4"
        (rabbit4-i, 5721…); None when they name neither (then a fault's node name alone says which)."""
        return layout_of_ports([parse_uri(u, AMQP_SCHEMES).port for u in self.uris])

    def has_node(self, node: str) -> bool:
        if self.fault_control.local:
            found = local_node(node)
            return (found is not None and found.index <= self.nodes and self.local_uris()
                    and self.local_layout() in (None, found.layout))
        return node in self.fault_control.node_vars()

    @field_validator("variant")
    @classmethod
    def _variant_exists(cls, name: str | None) -> str | None:
        """A variant with no files is refused at load, before any load is sent (rbench.config.variants)."""
        if name is not None:
            try:
                load_variant(name)
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix("variant: ")) from None
        return name

    @field_validator("uris", "stream_uris")
    @classmethod
    def _parsed(cls, uris: list[str], info: Any) -> list[str]:
        """Every URI is read here by the one parser the drivers use (rbench.config.uri), so a URI
        that validates is one every driver can open and every message can mask."""
        schemes = AMQP_SCHEMES if info.field_name == "uris" else STREAM_SCHEMES
        for i, uri in enumerate(uris):
            try:
                parse_uri(uri, schemes)
            except ConfigError as exc:
                raise ValueError(f"[{i}] {exc}") from None
        return uris


class Fault(StrictModel):
    """One fault of the run: at ``at`` after the load starts, do ``action`` to ``node`` (docs/faults.md)."""

    at: Seconds = Field(description="When, after the cluster's load starts (t0).")
    action: FaultAction = Field(description="kill (SIGKILL), stop (graceful), pause (SIGSTOP) or restart (stop, then "
                                            "start at once).")
    node: str = Field(min_length=1, pattern=_NODE_NAME,
                      description="rabbit-2 on the local cluster; a name of fault_control.nodes on a real one.")
    restart_after: Seconds | None = Field(default=None, gt=0,
                                          description="Bring the node back this long after the fault (start after kill "
                                                      "or stop, resume after pause); null: at the end of the run.")
    cluster: str | None = Field(default=None, description="The cluster; default every cluster that has the node.")
