"""The file descriptors a task's connections need, against the host's RLIMIT_NOFILE.

One rule for the two places that ask it: the coordinator before a local run (its executors are this
host) and each task before it opens a connection (any host). Pure standard library, so the executor
side reads it without pydantic.
"""
from __future__ import annotations

import resource

from rbench.config.types import TaskPlan
from rbench.errors import ConfigError

# file descriptors a task needs besides its connections: Parquet parts, the control channel, the
# metrics port, Python's and Spark's own (a task holds about 40; this leaves room)
FD_MARGIN = 256


def connections_planned(plan: TaskPlan) -> int:
    """Every connection the task will hold at once: its clients' and its idle ones."""
    layout = plan.connections
    return layout.client_connections(len(plan.publishers), len(plan.consumers)) + layout.idle


def fd_problem(plan: TaskPlan) -> str | None:
    """Why this host cannot hold ``plan``'s connections (more than the hard RLIMIT_NOFILE), or None."""
    need = connections_planned(plan) + FD_MARGIN
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or need <= hard:
        return None
    return (f"idle_connections: task {plan.task} plans {connections_planned(plan):,} connections, about {need:,} file "
            f"descriptors, but this host allows {hard:,} (hard limit); raise it (ulimit -n, LimitNOFILE) or spread "
            f"the connections over more tasks")


def raise_for_control(tasks: int) -> int:
    """Make room on the coordinator for one control connection per task: its RLIMIT_NOFILE soft limit up to the
    hard one when ``tasks`` + FD_MARGIN need it (a default soft limit of 1,024 would refuse the thousandth
    executor's connection: docs/scale.md). More than the hard limit allows is one line naming ``ulimit -n``.
    Returns the soft limit the coordinator runs with."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = tasks + FD_MARGIN
    if soft == resource.RLIM_INFINITY or need <= soft:
        return soft
    if hard != resource.RLIM_INFINITY and need > hard:
        raise ConfigError(f"tasks: {tasks:,} tasks each hold a control connection to the coordinator, about {need:,} "
                          f"file descriptors, but this host allows {hard:,} (hard limit); raise it (ulimit -n)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard
