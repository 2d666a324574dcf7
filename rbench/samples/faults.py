"""run.json's ``faults``: every fault action the coordinator executed, one record each (docs/faults.md).

The coordinator writes these records and the reduce reads them back as part of the run record
(rbench.samples.record), so the shape is stated once, here. Times are ``time.time_ns()`` wall clock, like the samples':
``t_start_ns``/``t_end_ns`` bracket the fault action (the kill, the graceful stop, the SIGSTOP, or a
restart's stop), ``t_back_start_ns``/``t_back_end_ns`` the action that brought the node back (start,
resume, or a restart's start); they are null when the node was never brought back (the back
action was not reached). A fault that never started (the run ended first) has no record.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from rbench.faults.terms import FAULT_ACTIONS

_FIELDS: dict[str, tuple[type, ...]] = {
    "cluster": (str,), "index": (int,), "action": (str,), "node": (str,), "at_s": (float, int),
    "restart_after_s": (float, int, type(None)), "t_start_ns": (int,), "t_end_ns": (int,),
    "t_back_start_ns": (int, type(None)), "t_back_end_ns": (int, type(None)), "ok": (bool,), "error": (str, type(None)),
}


@dataclass(frozen=True)
class FaultRecord:
    """One executed fault on one cluster, as run.json keeps it."""

    cluster: str
    index: int                       # position in the workload's faults list
    action: str                      # kill | stop | pause | restart
    node: str
    at_s: float                      # planned: seconds after the cluster's t0
    restart_after_s: float | None    # planned; None: brought back at the end of the run
    t_start_ns: int
    t_end_ns: int
    t_back_start_ns: int | None
    t_back_end_ns: int | None
    ok: bool                         # both the fault and the way back succeeded
    error: str | None                # the first failure, one line

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "faults") -> FaultRecord:
        """Read one record; ValueError names the field that is missing or of the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
        for name, types in _FIELDS.items():
            if name not in data:
                raise ValueError(f"{where}.{name}: missing")
            value = data[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ValueError(f"{where}.{name}: expected {' or '.join(t.__name__ for t in types)}, got {value!r}")
        if data["action"] not in FAULT_ACTIONS:
            raise ValueError(f"{where}.action: expected one of {', '.join(FAULT_ACTIONS)}, got {data['action']!r}")
        restart = data["restart_after_s"]
        return cls(cluster=data["cluster"], index=data["index"], action=data["action"], node=data["node"],
                   at_s=float(data["at_s"]), restart_after_s=None if restart is None else float(restart),
                   t_start_ns=data["t_start_ns"], t_end_ns=data["t_end_ns"], t_back_start_ns=data["t_back_start_ns"],
                   t_back_end_ns=data["t_back_end_ns"], ok=data["ok"], error=data["error"])

    @property
    def down_ns(self) -> tuple[int, int | None]:
        """From the start of the fault to the moment the node was back (None: never brought back)."""
        return self.t_start_ns, self.t_back_end_ns

