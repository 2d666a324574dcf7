"""A per-cluster sentence as the report's notes (one per run and cluster) and as the summary's line.

Several figures of the reduce end in one sentence per cluster (unroutable messages, deliveries that came
again): each module says how to word it from the cluster's rows of the clusters table and of the steps table;
this module gives both places it is shown the same rows.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

Row = dict[str, Any]
LineOf = Callable[[str, list[Row], list[Row]], "str | None"]   # (cluster, its clusters rows, its steps) → sentence


def notes(line_of: LineOf, clusters: list[Row], steps: list[Row]) -> list[str]:
    """One note per (run, cluster) with something to say, prefixed with the run id."""
    out = []
    for c in clusters:
        mine = [s for s in steps if s["run_id"] == c["run_id"] and s["cluster"] == c["cluster"]]
        line = line_of(str(c["cluster"]), [c], mine)
        if line is not None:
            out.append(f"{c['run_id']}: {line}")
    return out


def print_cluster(line_of: LineOf, cluster: str, reduced: Any, out: TextIO | None = None) -> None:
    """The summary's line for one cluster of a ReduceResult (nothing without a reduce or anything to say)."""
    if reduced is None:
        return
    runs = [c for c in reduced.clusters if c["cluster"] == cluster]
    line = line_of(cluster, runs, [s for s in reduced.steps if s["cluster"] == cluster])
    if line is not None:
        print(line, file=out)
