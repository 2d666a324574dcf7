"""The workload's connection fields: how clients share AMQP connections, idle connections, connect pacing.

Read here once into the plan's typed ConnectionLayout (rbench.config.types); the rules that tie them to
the driver are in rbench.config.checks (docs/connections.md).
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from rbench.config.base import StrictModel
from rbench.config.types import ChurnSpec, ConnectionLayout

# connections one task may plan (client ones and idle ones together): far beyond what a host's file
# descriptors allow by default, low enough that a typo is refused instead of exhausting the executor
MAX_CONNECTIONS_PER_TASK = 1_000_000
CONNECT_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?:/\s*s)?\s*$")


def _connect_rate(value: Any) -> Any:
    """`connect_rate: 50/s` or `50`: connections per second; anything else is left to pydantic to refuse."""
    if isinstance(value, str):
        m = CONNECT_RATE.match(value)
        if m is None:
            raise ValueError(f"expected connections per second as R/s (e.g. 50/s), got {value!r}")
        return float(m.group(1))
    return value


def _connections(value: Any) -> Any:
    """per_client, per_task or a whole number of connections per task; one line otherwise, not a union's two."""
    if value in ("per_client", "per_task"):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CONNECTIONS_PER_TASK:
        return value
    raise ValueError(f"expected per_client, per_task or N connections per task (1 to {MAX_CONNECTIONS_PER_TASK:,}), "
                     f"got {value!r}")


ConnectRate = Annotated[float, BeforeValidator(_connect_rate)]
Connections = Annotated[Literal["per_client", "per_task"] | int, BeforeValidator(_connections)]
# churn opens per task per second: enough to take a broker's accept loop to its knees, low enough that a typo
# (50000/s) is refused instead of running a host and a broker out of ports and file descriptors
MAX_CHURN_RATE = 1000.0


class Churn(StrictModel):
    """Connections a task opens and closes while the load runs (issue 32): the broker's cost of a client that
    connects for one request, beside steady clients whose latency it may disturb (docs/connections.md)."""

    rate: ConnectRate = Field(ge=0, le=MAX_CHURN_RATE, description="Per task: connections opened (and closed) per "
                              "second, as R/s (e.g. 50/s) or a number; 0 = none (a step without the run's churn).")
    channel: bool = Field(default=True, description="Open a channel on each churned connection before closing it.")
    declare: bool = Field(default=False, description="Declare an exclusive, auto-delete queue on each churned "
                          "connection (on a channel of its own) before closing it.")

    def spec(self) -> ChurnSpec | None:
        """What the plan hands the tasks for a step with this churn (None: rate 0, no churn)."""
        return ChurnSpec(self.rate, self.channel, self.declare) if self.rate > 0 else None



def layout(connections: str | int | None, producer_channels: int, consumer_channels: int, idle: int,
           connect_rate: float | None) -> ConnectionLayout:
    """The plan's ConnectionLayout for these fields (None: per_task, the layout of workload files)."""
    if isinstance(connections, int):
        return ConnectionLayout("fixed", connections, 1, 1, idle, connect_rate)
    if connections == "per_client":
        return ConnectionLayout("per_client", 1, producer_channels, consumer_channels, idle, connect_rate)
    return ConnectionLayout("per_task", 1, 1, 1, idle, connect_rate)
