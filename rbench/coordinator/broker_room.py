"""Before any connection opens: can each cluster's broker hold the connections the plan will open?

RabbitMQ holds one file descriptor per connection and reads its limit once, at boot. A run that opens more
than that does not fail cleanly: 3.10 stops accepting at ``sockets_total`` (the attempts time out and the
load's own consumers starve beside them), and 4.0 ran out of descriptors altogether (``emfile``), which broke
its metadata tables until the node was restarted (docs/connections.md). So the plan's connections (every
task's client and idle connections) are set against the room /api/nodes stated before the run
(rbench.samples.broker_facts.NodeFds), and a plan that does not fit is one line naming the limit to raise.
"""
from __future__ import annotations

from collections.abc import Mapping

from rbench.config.fds import connections_planned
from rbench.config.types import RunPlan
from rbench.errors import ConfigError
from rbench.samples.broker_facts import BrokerFacts

# descriptors left to the broker itself beyond the planned connections (its queues' files, the management
# listener's own sockets, the sampler's connection, a colleague's test): 4.0 counts them all in fd_total
HEADROOM = 64


def room_problem(cluster: str, planned: int, facts: BrokerFacts) -> str | None:
    """Why ``planned`` connections will not fit in the broker's nodes together, or None (also None when the
    broker did not state its limits: no management API, or an unknown layout)."""
    if planned <= 0 or not facts.node_fds:
        return None
    rooms = [(n, n.room()) for n in facts.node_fds]
    if any(r is None for _, r in rooms):
        return None
    free = sum(r[0] for _, r in rooms if r is not None)
    if planned + HEADROOM <= free:
        return None
    said = "; ".join(f"{n.node}: {r[1]}" for n, r in rooms if r is not None)
    return (f"cluster {cluster}: idle_connections/connections: the run plans {planned:,} connections, but the broker "
            f"can take about {max(free - HEADROOM, 0):,} more (management API /api/nodes: {said}); raise the broker's "
            f"file-descriptor limit (ulimit -n / LimitNOFILE for its service, a limits.d nofile entry for the rabbitmq "
            f"user where su starts it: scripts/ensure-broker.sh, scripts/broker4.sh) and restart it, or plan fewer")


def check_broker_room(plan: RunPlan, brokers: Mapping[str, BrokerFacts] | None) -> None:
    """ConfigError with room_problem's line for the first cluster whose planned connections do not fit."""
    for cluster in plan.clusters:
        facts = (brokers or {}).get(cluster.target.name)
        if facts is None:
            continue
        problem = room_problem(cluster.target.name, sum(connections_planned(t) for t in cluster.tasks), facts)
        if problem is not None:
            raise ConfigError(problem)
