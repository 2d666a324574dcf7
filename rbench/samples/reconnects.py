"""The connections a run's tasks lost and got back, as run.json lists them.

The reduce reads them only through :func:`read_reconnects`, so where they live in run.json is stated
once (the cluster's entry); a run without them has none. Times are wall-clock ns like the samples'.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rbench.errors import SinkError


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
    """Where the cluster's reconnects are (``clusters[i].reconnects``, written by the coordinator when the
    cluster's stage ends: rbench.samples.runinfo), and the raw list."""
    for i, c in enumerate(run.get("clusters") or []):
        if isinstance(c, Mapping) and c.get("name") == cluster:
            return f"clusters[{i}].reconnects", c.get("reconnects") or []
    return "clusters", []


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
