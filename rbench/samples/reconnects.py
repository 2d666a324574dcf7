"""The connections a run's tasks lost and got back, as run.json lists them, and the outcome their cut leaves.

The reduce reads them only through :func:`read_reconnects`, so where they live in run.json is stated
once (tried in order: the cluster's entry, the tasks' results, the top level); a run without them has
none. Times are wall-clock ns like the samples'.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rbench.errors import SinkError

# The published outcome of a message in flight when its connection died: no confirm came, it is never
# re-sent, and a consumer that got it anyway counts it as delivered (never as lost). The clients' branch
# adds it to samples/schema.py OUTCOMES; readers here compare outcome strings.
CONNECTION_LOST_OUTCOME = "connection_lost"


@dataclass(frozen=True)
class Reconnect:
    """One connection a task lost (back at ``t_back_ns``; None: not during the run)."""

    task: int
    t_lost_ns: int
    t_back_ns: int | None
    uri: str | None
    in_flight: int          # messages in flight at the cut (written with outcome connection_lost)
    skipped: int            # schedule slots not published while disconnected


def _raw(run: Mapping[str, Any], cluster: str) -> tuple[str, Any]:
    """Where the cluster's reconnects are, and the raw list: ``clusters[i].reconnects``, else the tasks'
    ``clusters[i].task_results[j].reconnects``, else ``reconnects.<cluster>`` or a top-level ``reconnects``
    list whose entries name their ``cluster``."""
    for i, c in enumerate(run.get("clusters") or []):
        if isinstance(c, Mapping) and c.get("name") == cluster:
            if c.get("reconnects") is not None:
                return f"clusters[{i}].reconnects", c["reconnects"]
            from_tasks = [r for t in c.get("task_results") or [] if isinstance(t, Mapping) for r in t.get("reconnects") or []]
            if from_tasks:
                return f"clusters[{i}].task_results[].reconnects", from_tasks
    top = run.get("reconnects")
    if isinstance(top, Mapping):
        return f"reconnects.{cluster}", top.get(cluster) or []
    if isinstance(top, list):
        return "reconnects", [r for r in top if isinstance(r, Mapping) and r.get("cluster") == cluster]
    return "reconnects", []


def _int(where: str, entry: Mapping[str, Any], key: str, optional: bool = False) -> int | None:
    value = entry.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise SinkError(f"run.json: {where}.{key}: expected {'int or null' if optional else 'int'}, got {value!r}")
    return value


def read_reconnects(run: Mapping[str, Any], cluster: str) -> list[Reconnect]:
    """Every connection the cluster's tasks lost during the run, by ``t_lost_ns``; [] when none was logged.
    A malformed entry is a SinkError naming the field."""
    where, raw = _raw(run, cluster)
    if not isinstance(raw, list):
        raise SinkError(f"run.json: {where}: expected a list, got {type(raw).__name__}")
    out = []
    for i, e in enumerate(raw):
        w = f"{where}[{i}]"
        if not isinstance(e, Mapping):
            raise SinkError(f"run.json: {w}: expected an object, got {type(e).__name__}")
        uri = e.get("uri")
        if uri is not None and not isinstance(uri, str):
            raise SinkError(f"run.json: {w}.uri: expected str or null, got {uri!r}")
        out.append(Reconnect(task=int(_int(w, e, "task") or 0), t_lost_ns=int(_int(w, e, "t_lost_ns") or 0),
                             t_back_ns=_int(w, e, "t_back_ns", optional=True), uri=uri,
                             in_flight=_int(w, e, "in_flight", optional=True) or 0,
                             skipped=_int(w, e, "skipped", optional=True) or 0))
    return sorted(out, key=lambda r: (r.t_lost_ns, r.task))
