"""run.json's ``faults``: every fault action the coordinator executed, one record each.

The reduce reads the records only through :func:`read_faults`, so where they live and what they hold
is stated once. Times are ``time.time_ns()`` wall clock, like the samples': ``t_start_ns``/``t_end_ns``
bracket the fault action (the node is down, stopped or paused from ``t_end_ns``),
``t_back_start_ns``/``t_back_end_ns`` the action that brought the node back; both null when the node
was not brought back during the run. A run from before faults existed has none.

(The fault executor's branch writes the same record with the same names: ``FaultRecord``,
``read_faults``; at merge one module stays.)
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rbench.errors import SinkError

FAULT_ACTIONS: tuple[str, ...] = ("kill", "stop", "pause", "restart")
_FIELDS: dict[str, tuple[type, ...]] = {
    "cluster": (str,), "index": (int,), "action": (str,), "node": (str,), "at_s": (float, int),
    "restart_after_s": (float, int, type(None)), "t_start_ns": (int,), "t_end_ns": (int,),
    "t_back_start_ns": (int, type(None)), "t_back_end_ns": (int, type(None)), "ok": (bool,), "error": (str, type(None)),
}


@dataclass(frozen=True)
class FaultRecord:
    """One executed fault on one cluster; ``index`` is 0-based (people read fault index + 1)."""

    cluster: str
    index: int
    action: str                      # kill | stop | pause | restart
    node: str
    at_s: float                      # planned: seconds after the cluster's t0
    restart_after_s: float | None
    t_start_ns: int
    t_end_ns: int
    t_back_start_ns: int | None
    t_back_end_ns: int | None
    ok: bool
    error: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "faults") -> FaultRecord:
        """One record; ValueError names the field that is missing or of the wrong type."""
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


def read_faults(run: Mapping[str, Any], cluster: str | None = None) -> list[FaultRecord]:
    """The fault records of a loaded run.json, in the order they were executed (only ``cluster``'s when
    given); [] for a run without faults. A malformed record is a SinkError naming the field."""
    raw = run.get("faults") or []
    try:
        if not isinstance(raw, list):
            raise ValueError(f"faults: expected a list, got {type(raw).__name__}")
        records = [FaultRecord.from_json(r, f"faults[{i}]") for i, r in enumerate(raw)]
    except ValueError as exc:
        raise SinkError(f"run.json: {exc}") from None
    return [r for r in records if cluster is None or r.cluster == cluster]
