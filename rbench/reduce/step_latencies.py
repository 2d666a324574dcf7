"""Exact percentiles of the latencies (rbench.reduce.metrics.LATENCIES) of every step: one unit of work per
(run, cluster, side) reads that cluster's part files (only the time columns) with pyarrow and selects the
ranks with ``numpy.partition``, so a step's values are in one worker and nothing is shuffled or sorted."""
from __future__ import annotations

from typing import Any

import numpy as np

from rbench.reduce.metrics import METRICS, PCT_NAMES, PERCENTILES
from rbench.reduce.plan import Plan


def step_latencies(samples: Any, plan: Plan, on_driver: bool) -> dict[tuple[int, int], dict[str, Any]]:
    """(gid, metric index) → n, vmax and the PERCENTILES of every step's latencies: one Spark task per unit, or
    with ``on_driver`` (small samples, rbench.reduce.stats.on_driver) the same function on the driver, without
    a Spark job and its Python workers."""
    units = []
    for kind, run_id, cluster, files in samples.parts:
        rc = plan.rc_of(run_id, cluster)
        if rc is not None and files:
            units.append((kind, files, plan.by_rc[rc], PERCENTILES, plan.t0[rc]))
    if not units:
        return {}
    if on_driver:
        parts = [_unit_latencies(u) for u in units]
    else:
        sc = samples.spark.sparkContext
        parts = sc.parallelize(units, len(units)).map(_unit_latencies).collect()
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for part in parts:
        out.update(part)
    return out


# a time column: int64 values (nulls as 0) and its validity (None: no nulls)
Column = tuple[np.ndarray, "np.ndarray | None"]


def _unit_latencies(unit: tuple[str, list[str], list[tuple[int, int, int, int]], tuple[float, ...], int]
                    ) -> dict[tuple[int, int], dict[str, Any]]:
    import pyarrow.parquet as pq

    kind, files, wins, pcts, t0 = unit
    cols = ["step", "t_intended", "t_sent", "t_received" if kind == "consumed" else "t_confirmed"]
    tbl = pq.read_table(files, columns=cols)
    arr: dict[str, Column] = {}
    for c in cols:
        col = tbl.column(c)
        arr[c] = (col.fill_null(0).to_numpy().astype(np.int64, copy=False),
                  ~col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None)
    return select_latencies(kind, arr, wins, pcts, t0)


def select_latencies(kind: str, arr: dict[str, Column], wins: list[tuple[int, int, int, int]], pcts: tuple[float, ...],
                     t0: int) -> dict[tuple[int, int], dict[str, Any]]:
    """The ranks of ``pcts`` (and n, max) of each window's latencies of one cluster's ``kind`` side; ``arr``: its
    step and time columns."""
    import math

    if kind == "consumed":
        metrics = [(0, "t_received", "t_intended"), (1, "t_received", "t_sent")]
    else:
        metrics = [(2, "t_confirmed", "t_sent"), (3, "t_sent", "t_intended")]
    res: dict[tuple[int, int], dict[str, Any]] = {}
    step, ti = arr["step"][0], arr["t_intended"][0]
    base = np.ones(step.size, dtype=bool)
    for c in ("step", "t_intended"):
        ok = arr[c][1]
        if ok is not None:
            base &= ok
    base &= ti >= t0            # stale rows (an earlier run's): measurement windows start after t0 anyway
    for gid, s, m, e in wins:
        meas = base & (step == s) & (ti >= m) & (ti < e)
        for mi, a, b in metrics:
            sel = meas
            for c in (a, b):
                ok = arr[c][1]
                if ok is not None:
                    sel = sel & ok
            v = arr[a][0][sel] - arr[b][0][sel]
            if not v.size:
                continue
            n = v.size
            plan = []
            for p in pcts:
                h = (n - 1) * p
                r0 = math.floor(h)
                plan.append((r0, min(r0 + 1, n - 1), h - r0))
            kth = sorted({r for r0, r1, _ in plan for r in (r0, r1)})
            part = np.partition(v, kth)
            qs = []
            for r0, r1, frac in plan:
                x0, x1 = int(part[r0]), int(part[r1])
                qs.append(x0 + frac * (x1 - x0))
            res[(gid, mi)] = {"n": n, "vmax": int(v.max()), "q": qs}
    return res


def latency_table(plan: Plan, ranks: dict[tuple[int, int], dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """gid → {e2e_p50_ms, …, confirm_max_ms} (nulls for a latency without values)."""
    out: dict[int, dict[str, Any]] = {}
    for gid in range(len(plan.rows)):
        row: dict[str, Any] = {}
        for mi, metric in enumerate(METRICS):
            r = ranks.get((gid, mi))
            for i, name in enumerate(PCT_NAMES):
                row[f"{metric}_{name}_ms"] = None if r is None else r["q"][i] / 1e6
            row[f"{metric}_max_ms"] = None if r is None else r["vmax"] / 1e6
        out[gid] = row
    return out

