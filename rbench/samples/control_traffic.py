"""What the control channel carried over a run (run.json ``control_traffic``): the coordinator's load per task.

Every task sends the coordinator a line a second (progress deltas, histograms) plus a few at its start and
end; at a thousand executors that is the coordinator's busiest loop, so a run records how many lines and bytes
it read and over how many connections (bench/bench_scale.py reads it; docs/scale.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rbench.samples.fields import Fields


@dataclass(frozen=True)
class ControlTraffic:
    """Lines and bytes the coordinator read from tasks (lines it refused included), and the connections."""

    lines: int = 0
    bytes: int = 0
    connections: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"lines": self.lines, "bytes": self.bytes, "connections": self.connections}

    @classmethod
    def from_json(cls, data: object, where: str) -> ControlTraffic:
        f = Fields(data, where)
        return cls(lines=f.req_int("lines", 0), bytes=f.req_int("bytes", 0), connections=f.req_int("connections", 0))
