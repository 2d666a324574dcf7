"""What run.json says about the faults of a run and the clients' reconnects (docs/parquet.md, run.json).

The coordinator executes the workload's ``faults`` and logs each action in run.json; the tasks log
every connection they lost and got back. The reduce reads both only through these two functions, so
where the keys live in run.json is stated once: an older run without them simply has no faults.

Times are wall-clock ns (``time.time_ns()``, the samples' clock). A fault starts at ``t_start_ns``
(the action began), the action ended at ``t_end_ns`` (the node is down, stopped or paused from then),
a restart/resume ran from ``t_back_start_ns`` to ``t_back_end_ns`` (the node is back); both null when
the node was not brought back during the run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rbench.errors import SinkError

# The published outcome of a message in flight when its connection died: no confirm came, it is never
# re-sent, and if a consumer got it anyway it counts as delivered (never as lost). samples/schema.py's
# OUTCOMES gains it with the clients' reconnect; readers compare outcome strings.
CONNECTION_LOST = "connection_lost"
FAULT_ACTIONS: tuple[str, ...] = ("kill", "stop", "pause", "restart")


@dataclass(frozen=True)
class Fault:
    """One executed fault action of run.json ``faults`` (``index`` is 0-based; people read fault index + 1)."""

    cluster: str
    index: int
    action: str
    node: str
    at_s: float
    restart_after_s: float | None
    t_start_ns: int
    t_end_ns: int
    t_back_start_ns: int | None
    t_back_end_ns: int | None
    ok: bool
    error: str | None

    @property
    def shown(self) -> int:
        """The fault number people read (counted from 1, like steps)."""
        return self.index + 1


@dataclass(frozen=True)
class Reconnect:
    """One connection a task lost (and got back at ``t_back_ns``, null if never during the run)."""

    task: int
    t_lost_ns: int
    t_back_ns: int | None
    uri: str | None
    in_flight: int          # messages in flight at the cut (written with outcome connection_lost)
    skipped: int            # schedule slots not published while disconnected


def _field(where: str, entry: dict[str, Any], key: str, kind: type, optional: bool = False) -> Any:
    """``entry[key]`` as ``kind`` (an int is a float too; a bool is neither); a SinkError naming the field otherwise."""
    value = entry.get(key)
    if value is None and optional:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is float and isinstance(value, (int, float)) and number:
        return float(value)
    if (kind is int and number and isinstance(value, int)) or (kind is str and isinstance(value, str)):
        return value
    raise SinkError(f"run.json {where}.{key}: expected {'null or ' if optional else ''}{kind.__name__}, got {value!r}")


def read_faults(run: dict[str, Any]) -> list[Fault]:
    """run.json ``faults`` (top level, one entry per executed action, with its cluster), in (cluster, index)
    order; [] when the run had none. A malformed entry is a SinkError naming the field."""
    raw = run.get("faults")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise SinkError(f"run.json faults: expected a list, got {type(raw).__name__}")
    out = []
    for i, e in enumerate(raw):
        where = f"faults[{i}]"
        if not isinstance(e, dict):
            raise SinkError(f"run.json {where}: expected an object, got {type(e).__name__}")
        action = _field(where, e, "action", str)
        if action not in FAULT_ACTIONS:
            raise SinkError(f"run.json {where}.action: expected one of {', '.join(FAULT_ACTIONS)}, got {action!r}")
        out.append(Fault(
            cluster=_field(where, e, "cluster", str), index=_field(where, e, "index", int), action=action,
            node=_field(where, e, "node", str), at_s=_field(where, e, "at_s", float),
            restart_after_s=_field(where, e, "restart_after_s", float, optional=True),
            t_start_ns=_field(where, e, "t_start_ns", int), t_end_ns=_field(where, e, "t_end_ns", int),
            t_back_start_ns=_field(where, e, "t_back_start_ns", int, optional=True),
            t_back_end_ns=_field(where, e, "t_back_end_ns", int, optional=True),
            ok=bool(e.get("ok", True)), error=_field(where, e, "error", str, optional=True)))
    return sorted(out, key=lambda f: (f.cluster, f.index))


def _reconnect_entries(run: dict[str, Any], cluster: str) -> tuple[str, list[Any]]:
    """Where a cluster's reconnects are in run.json, and the raw list. Tried in this order: the cluster's
    entry (``clusters[i].reconnects``), the top level keyed by cluster (``reconnects.<cluster>``), a top-level
    list whose entries name their cluster, and the tasks' results (``clusters[i].task_results[j].reconnects``)."""
    for i, c in enumerate(run.get("clusters") or []):
        if isinstance(c, dict) and c.get("name") == cluster:
            if c.get("reconnects") is not None:
                return f"clusters[{i}].reconnects", c["reconnects"]
            from_tasks = [r for t in c.get("task_results") or [] if isinstance(t, dict) for r in t.get("reconnects") or []]
            if from_tasks:
                return f"clusters[{i}].task_results[].reconnects", from_tasks
    top = run.get("reconnects")
    if isinstance(top, dict):
        return f"reconnects.{cluster}", top.get(cluster) or []
    if isinstance(top, list):
        return "reconnects", [r for r in top if isinstance(r, dict) and r.get("cluster") == cluster]
    return "reconnects", []


def read_reconnects(run: dict[str, Any], cluster: str) -> list[Reconnect]:
    """Every connection the cluster's tasks lost during the run, by ``t_lost_ns``; [] when none was logged."""
    where, raw = _reconnect_entries(run, cluster)
    if not isinstance(raw, list):
        raise SinkError(f"run.json {where}: expected a list, got {type(raw).__name__}")
    out = []
    for i, e in enumerate(raw):
        w = f"{where}[{i}]"
        if not isinstance(e, dict):
            raise SinkError(f"run.json {w}: expected an object, got {type(e).__name__}")
        out.append(Reconnect(task=_field(w, e, "task", int), t_lost_ns=_field(w, e, "t_lost_ns", int),
                             t_back_ns=_field(w, e, "t_back_ns", int, optional=True),
                             uri=_field(w, e, "uri", str, optional=True),
                             in_flight=int(_field(w, e, "in_flight", int, optional=True) or 0),
                             skipped=int(_field(w, e, "skipped", int, optional=True) or 0)))
    return sorted(out, key=lambda r: (r.t_lost_ns, r.task))
