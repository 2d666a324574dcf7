"""Churn's figures beside each step (docs/connections.md, "Churn"): connections opened and closed in the
step's measurement window, what they cost the broker's CPU, and what they did to the steady clients' latency.

Both costs are differences against a *baseline step*: the nearest step of the same run and cluster that ran
the same message rate without churn (an earlier one first). The broker's CPU per churned connection is the
step's broker CPU seconds (rbench.reduce.broker: the beam process's utime+stime from /proc, else Prometheus'
Erlang runtime, over the measurement window) less the baseline step's CPU rate times the window, divided by
the connections churned in the window; the latency effect is the step's end-to-end p50 and p99 over the
baseline's. A churned step without such a baseline (every step churns, or the rates differ) gets nulls there.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from rbench.reduce.load import RunMeta
from rbench.samples.churn import ChurnStats
from rbench.samples.connections import percentile_ms
from rbench.samples.conventions import shown_step

COLUMN_TYPES: tuple[tuple[str, pa.DataType], ...] = (
    ("churn_target_per_s", pa.float64()), ("churned", pa.int64()), ("churn_failed", pa.int64()),
    ("churn_skipped", pa.int64()), ("churn_per_s", pa.float64()), ("churn_connect_p50_ms", pa.float64()),
    ("churn_connect_p99_ms", pa.float64()), ("churn_cycle_p50_ms", pa.float64()), ("churn_baseline_step", pa.int32()),
    ("broker_cpu_ms_per_churn", pa.float64()), ("churn_e2e_p50_ratio", pa.float64()),
    ("churn_e2e_p99_ratio", pa.float64()),
)
METHOD = ("churn: connections each task opened and closed at R/s during the step (open-loop, its own schedule); "
          "churned = open-close cycles that completed and started in the step's measurement window, all tasks; "
          "churn_connect = TCP connect + handshake to connection.open-ok, cycle = connect to close-ok, nearest-rank "
          "over every churned connection; baseline = the nearest step of the same run and cluster at the same "
          "message rate without churn (earlier first); broker_cpu_ms_per_churn = (broker CPU s in the window − the "
          "baseline's broker CPU s per s × the window) ÷ churned, ms, broker CPU as broker_cpu_s measures it; "
          "churn_e2e_p50/p99_ratio = the step's end-to-end percentile ÷ the baseline's")


def _churn_of(run: RunMeta, cluster: str) -> tuple[int | None, dict[int, float], ChurnStats | None]:
    """(t0, step → churn per task, the counted tasks' churn joined) of one run's cluster."""
    for c in run.clusters:
        if c.name == cluster:
            rates = {s.step: s.churn_per_task for s in c.steps if s.churn_per_task}
            reported = [r.churn for r in c.task_results if r.churn is not None]
            return c.t0_ns, rates, ChurnStats.total(reported) if reported else None
    return None, {}, None


def baseline(rows: list[dict[str, Any]], i: int, churned: set[int]) -> int | None:
    """The row of ``rows`` (one run's cluster, in step order) that is row i's baseline: no churn, same rate."""
    rate = rows[i].get("target_rate")
    same = [j for j in range(len(rows)) if j not in churned and rows[j].get("target_rate") == rate]
    earlier = [j for j in same if j < i]
    later = [j for j in same if j > i]
    return earlier[-1] if earlier else (later[0] if later else None)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def step_figures(rows: list[dict[str, Any]], t0_ns: int | None, per_task: dict[int, float],
                 stats: ChurnStats | None, tasks: int) -> list[dict[str, Any]]:
    """COLUMN_TYPES for each row of one run's cluster (``rows`` in step order); nulls on steps without churn."""
    empty: dict[str, Any] = {name: None for name, _ in COLUMN_TYPES}
    out = [dict(empty) for _ in rows]
    churned_rows = {i for i, r in enumerate(rows) if r["step"] in per_task}
    for i in churned_rows:
        r, f = rows[i], out[i]
        f["churn_target_per_s"] = per_task[r["step"]] * tasks
        start, end = r.get("meas_start_ns"), r.get("meas_end_ns")
        if stats is None or t0_ns is None or start is None or end is None or end <= start:
            continue
        w = stats.window((start - t0_ns) // 1000, (end - t0_ns) // 1000)
        seconds = (end - start) / 1e9
        f.update(churned=len(w.at_us), churn_failed=len(w.failed_at_us), churn_skipped=len(w.skipped_at_us),
                 churn_per_s=len(w.at_us) / seconds, churn_connect_p50_ms=percentile_ms(w.connect_us, 0.5),
                 churn_connect_p99_ms=percentile_ms(w.connect_us, 0.99),
                 churn_cycle_p50_ms=percentile_ms(w.cycle_us, 0.5))
        b = baseline(rows, i, churned_rows)
        if b is None:
            continue
        base = rows[b]
        f["churn_baseline_step"] = base["step"]
        f["churn_e2e_p50_ratio"] = _ratio(r.get("e2e_p50_ms"), base.get("e2e_p50_ms"))
        f["churn_e2e_p99_ratio"] = _ratio(r.get("e2e_p99_ms"), base.get("e2e_p99_ms"))
        cpu, base_cpu = r.get("broker_cpu_s"), base.get("broker_cpu_s")
        b_start, b_end = base.get("meas_start_ns"), base.get("meas_end_ns")
        if cpu is not None and base_cpu is not None and b_start is not None and b_end is not None and b_end > b_start \
                and w.at_us:
            extra = cpu - base_cpu / ((b_end - b_start) / 1e9) * seconds
            f["broker_cpu_ms_per_churn"] = extra / len(w.at_us) * 1000.0
    return out


def add_figures(steps: pa.Table, runs: list[RunMeta]) -> pa.Table:
    """COLUMN_TYPES on every step row (nulls for runs and steps without churn)."""
    rows = steps.to_pylist()
    figures: list[dict[str, Any]] = [{name: None for name, _ in COLUMN_TYPES} for _ in rows]
    by_run = {r.run_id: r for r in runs}
    groups: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r["run_id"], r["cluster"]), []).append(i)
    for (run_id, cluster), idx in groups.items():
        run = by_run.get(run_id)
        if run is None:
            continue
        t0_ns, per_task, stats = _churn_of(run, cluster)
        if not per_task:
            continue
        idx.sort(key=lambda i: rows[i]["step"])
        tasks = next((c.tasks or len(c.task_results) for c in run.clusters if c.name == cluster), 0)
        for i, f in zip(idx, step_figures([rows[i] for i in idx], t0_ns, per_task, stats, tasks or 0)):
            figures[i] = f
    for name, kind in COLUMN_TYPES:
        steps = steps.append_column(name, pa.array([f[name] for f in figures], kind))
    return steps


def summary_lines(steps: list[dict[str, Any]]) -> list[str]:
    """One line per churned step for the end-of-run summary: the churn, its broker CPU and latency cost."""
    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    out = []
    for r in steps:
        if r.get("churn_target_per_s") is None:
            continue
        base = r.get("churn_baseline_step")
        against = ("no baseline step (none at the same rate without churn)" if base is None
                   else f"against step {shown_step(base)}: broker CPU "
                        f"{num(r.get('broker_cpu_ms_per_churn'), ',.3f')} ms per churned connection, e2e p50 "
                        f"×{num(r.get('churn_e2e_p50_ratio'), '.2f')}, p99 ×{num(r.get('churn_e2e_p99_ratio'), '.2f')}")
        out.append(f"{r['cluster']} step {shown_step(r['step'])}: churn {num(r.get('churn_per_s'), ',.1f')}/s of "
                   f"{r['churn_target_per_s']:,.1f}/s asked ({r.get('churned') or 0:,} opened and closed in the window, "
                   f"{r.get('churn_failed') or 0:,} failed, {r.get('churn_skipped') or 0:,} skipped; connect p50/p99 "
                   f"{num(r.get('churn_connect_p50_ms'), ',.2f')}/{num(r.get('churn_connect_p99_ms'), ',.2f')} ms); "
                   f"{against} (broker CPU from the sampler minus the baseline's rate, docs/connections.md)")
    return out
