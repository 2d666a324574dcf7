"""The workload file, validated at the YAML boundary.

Field names follow RabbitMQ PerfTest's vocabulary where one exists (producers,
consumers, rate, size, prefetch, multi_ack_every, confirm window) so a PerfTest user
can read a workload file without a glossary; `rbench perftest` maps its flags here.
The parts live in modules of their own (cluster, topology, clients, rates, observe,
fields) and every cross-field rule in rbench.config.checks; a Workload is a workload
those rules accept, so every command that loads one refuses the same files.
"""
from __future__ import annotations

from pydantic import model_validator

from rbench.config.checks import check_workload
from rbench.config.clients import Consumer, Pause, Publisher, Schedule
from rbench.config.cluster import Cluster, Fault, FaultAction, FaultCommands, FaultControl
from rbench.config.fields import WorkloadFields
from rbench.config.observe import BrokerMetrics, Progress, Regress
from rbench.config.rates import RateSearch, RateStep, SizeStep, Slo
from rbench.config.topology import Exchange, Queues, QueueType

# the parts' models, importable from here as they were when this module held them all
__all__ = [
    "BrokerMetrics", "Cluster", "Consumer", "Exchange", "Fault", "FaultAction", "FaultCommands", "FaultControl",
    "Pause", "Progress", "Publisher", "QueueType", "Queues", "RateSearch", "RateStep", "Regress", "Schedule",
    "SizeStep", "Slo", "Workload",
]


class Workload(WorkloadFields):
    """A whole run: where, how much, for how long."""

    @model_validator(mode="after")
    def _checked(self) -> Workload:
        check_workload(self)
        return self
