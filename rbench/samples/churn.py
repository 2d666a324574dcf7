"""A task's churned connections as run.json keeps them (task_results[].churn): when each opened, what it cost.

Churn (docs/connections.md, "Churn") opens and closes connections at a rate while the load runs. The task
keeps one entry per attempt, its start in microseconds after t0, so the reduce counts the attempts of each
step's measurement window exactly (the warm-up and the tail are left out, as for messages) and takes exact
percentiles over every task's connections.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rbench.samples.fields import Fields


@dataclass(frozen=True)
class ChurnStats:
    """One task's churned connections (or several tasks', joined): each list in the order they started."""

    at_us: tuple[int, ...] = ()          # each completed open-close: its start, µs after t0
    connect_us: tuple[int, ...] = ()     # its TCP connect + handshake to connection.open-ok
    cycle_us: tuple[int, ...] = ()       # its whole life: connect, channel, declare, close-ok
    failed_at_us: tuple[int, ...] = ()   # attempts that failed (refused, timed out, closed by the broker)
    skipped_at_us: tuple[int, ...] = ()  # attempts not started: too many still open (MAX_IN_FLIGHT)

    def to_json(self) -> dict[str, Any]:
        return {"at_us": list(self.at_us), "connect_us": list(self.connect_us), "cycle_us": list(self.cycle_us),
                "failed_at_us": list(self.failed_at_us), "skipped_at_us": list(self.skipped_at_us)}

    @classmethod
    def from_json(cls, data: object, where: str) -> ChurnStats:
        f = Fields(data, where)
        return cls(at_us=f.ints("at_us"), connect_us=f.ints("connect_us"), cycle_us=f.ints("cycle_us"),
                   failed_at_us=f.ints("failed_at_us"), skipped_at_us=f.ints("skipped_at_us"))

    @staticmethod
    def total(stats: Iterable[ChurnStats]) -> ChurnStats:
        out = list(stats)
        return ChurnStats(*(tuple(v for s in out for v in getattr(s, name)) for name in
                            ("at_us", "connect_us", "cycle_us", "failed_at_us", "skipped_at_us")))

    def window(self, start_us: int, end_us: int) -> ChurnStats:
        """The attempts that started in [start, end) µs after t0."""
        done = [i for i, at in enumerate(self.at_us) if start_us <= at < end_us]
        return ChurnStats(tuple(self.at_us[i] for i in done), tuple(self.connect_us[i] for i in done),
                          tuple(self.cycle_us[i] for i in done),
                          tuple(a for a in self.failed_at_us if start_us <= a < end_us),
                          tuple(a for a in self.skipped_at_us if start_us <= a < end_us))
