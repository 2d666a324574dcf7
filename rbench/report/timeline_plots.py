"""The per-second timeline of a report: throughput and latency within each run, faults shaded.

Throughput is drawn only for whole seconds inside a run's schedule: a second the run covered only in
part (the last, usually) would read as a drop that never happened; a whole second without a single
message is a real zero and is drawn as one.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from rbench.report.fault_plots import FAULT_COLOR, shade_fault
from rbench.report.plot_style import Row, log_ms_axis, rate_fmt, series_colors, series_of, widths


@dataclass
class TimelineSeries:
    """What the timeline plot draws for one series; NaN separates runs (a gap, not a zero)."""

    throughput_x: list[float] = field(default_factory=list)     # whole seconds inside the schedule
    published: list[float] = field(default_factory=list)
    consumed: list[float] = field(default_factory=list)
    latency_x: list[float] = field(default_factory=list)        # every second with a latency
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)           # step starts (s on this series' axis)


def _schedules(steps: list[Row]) -> dict[tuple[str, str], tuple[int, int, list[int]]]:
    """(run, cluster) → (first step start, last step end, every step start), ns."""
    out: dict[tuple[str, str], tuple[int, int, list[int]]] = {}
    for s in steps:
        if s.get("start_ns") is None or s.get("end_ns") is None:
            continue
        key = (str(s["run_id"]), str(s["cluster"]))
        lo, hi, starts = out.get(key, (int(s["start_ns"]), int(s["end_ns"]), []))
        out[key] = (min(lo, int(s["start_ns"])), max(hi, int(s["end_ns"])), [*starts, int(s["start_ns"])])
    return out


def placement(steps: list[Row], rows: list[Row], search: bool = False) -> dict[tuple[str, str], tuple[str, float]]:
    """(run, cluster) → (series name, seconds from the series' origin to this run's t0).

    A run's per-second rows count from its cluster's t0 (its first step's start); the probes of a
    rate search are one series per cluster, each placed at its real start after the first probe's."""
    names = series_of([*steps, *rows], search)
    firsts = {k: lo for k, (lo, _hi, _st) in _schedules(steps).items()}
    origin: dict[str, int] = {}
    for key, lo in firsts.items():
        origin[names[key]] = min(origin.get(names[key], lo), lo)
    return {key: (name, (firsts[key] - origin[name]) / 1e9 if key in firsts else 0.0) for key, name in names.items()}


def timeline_series(timeline: list[Row], steps: list[Row], search: bool = False) -> dict[str, TimelineSeries]:
    """Per series, the per-second points the timeline draws.

    Throughput: one point per whole second ``[s, s+1)`` of a run's schedule (first step start to
    last step end, which is the cluster's t0 onwards); a second the schedule covers only in part —
    the last one of a run that did not last whole seconds, the drain after it — is not drawn, and a
    whole second without any row is drawn as 0 (nothing was sent or received). Latency: every second
    that has one. A rate search's probes (several runs of one cluster) share one axis, each probe at
    its real start, with a gap between probes."""
    schedules = _schedules(steps)
    where = placement(steps, timeline, search)
    rows_by: dict[tuple[str, str], dict[int, Row]] = defaultdict(dict)
    for t in timeline:
        rows_by[(str(t["run_id"]), str(t["cluster"]))][int(t["second"])] = t
    out: dict[str, TimelineSeries] = {}
    for key in sorted(set(schedules) | set(rows_by), key=lambda k: where[k]):
        name, shift = where[key]
        ts = out.setdefault(name, TimelineSeries())
        lo, hi, starts = schedules.get(key, (None, None, []))
        seconds = rows_by.get(key, {})
        if ts.throughput_x:
            for lst in (ts.throughput_x, ts.published, ts.consumed):
                lst.append(math.nan)
        if lo is not None and hi is not None:
            whole = int((hi - lo) // 1_000_000_000)          # t0 = first step start: seconds 0 … whole-1 are complete
            for s in range(whole):
                r = seconds.get(s, {})
                ts.throughput_x.append(s + shift)
                ts.published.append(float(r.get("published") or 0))
                ts.consumed.append(float(r.get("consumed") or 0))
            ts.starts += [(st - lo) / 1e9 + shift for st in starts]
        if ts.latency_x:
            for lst in (ts.latency_x, ts.p50, ts.p99):
                lst.append(math.nan)
        for s in sorted(seconds):
            if seconds[s].get("e2e_p99_ms") is not None:
                ts.latency_x.append(s + shift)
                ts.p99.append(float(seconds[s]["e2e_p99_ms"]))
                ts.p50.append(float(seconds[s].get("e2e_p50_ms") or math.nan))
    return out


def timeline_plot(timeline: list[Row], steps: list[Row], path: Path, search: bool = False,
                  faults: list[Row] | None = None) -> Path:
    """Per-second throughput and latency within each run, x = seconds since the series' first step; each fault of
    ``faults`` (rows of faults.json) shaded from its start until the node was back."""
    series = timeline_series(timeline, steps, search)
    colors = series_colors(list(series))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 7), dpi=110, sharex=True)
    for name, ts in series.items():
        wide = widths(list(series))[name]
        ax1.plot(ts.throughput_x, ts.consumed, color=colors[name], lw=wide, alpha=0.75, label=f"{name}: consumed/s")
        ax1.plot(ts.throughput_x, ts.published, color=colors[name], lw=0.8, ls="--", alpha=0.7, label=f"{name}: published/s")
        if ts.latency_x:
            ax2.plot(ts.latency_x, ts.p99, color=colors[name], lw=wide, alpha=0.75, label=f"{name}: p99")
            ax2.plot(ts.latency_x, ts.p50, color=colors[name], lw=0.8, ls="--", label=f"{name}: p50")
    warm = max((s.get("warmup_s") or 0.0) for s in steps) if steps else 0.0
    for b in sorted({round(x, 3) for ts in series.values() for x in ts.starts}):
        for ax in (ax1, ax2):
            ax.axvline(b, color="grey", lw=0.6, ls=":")
            if warm > 0:
                ax.axvspan(b, b + warm, color="grey", alpha=0.08, lw=0)
    if faults:
        clusters = {f["cluster"] for f in faults}
        right = max((t["second"] for t in timeline), default=0) + 1       # a node never back: shaded to the end
        for f in faults:
            label = f"{f['action']} {f['node']}" + (f" ({f['cluster']})" if len(clusters) > 1 else "")
            for ax in (ax1, ax2):
                shade_fault(ax, f, 0.0, right)
            ax1.annotate(label, (f["at_s"], 0.02), xycoords=("data", "axes fraction"), fontsize=8, color=FAULT_COLOR,
                         va="bottom", ha="left", rotation=90)
    ax1.yaxis.set_major_formatter(FuncFormatter(rate_fmt))
    ax1.set_ylim(bottom=0)
    ax1.set_ylabel("msg/s (1 s buckets)")
    ax1.set_title("Throughput per whole second of the schedule (publish by t_sent, consume by t_received); "
                  "dotted = step starts, grey = warm-up"
                  + ("\nred = a fault until the node was back, darker = node down" if faults else ""), fontsize=10)
    if ax1.get_legend_handles_labels()[0]:
        ax1.legend(fontsize=7, ncol=2, loc="best")
    ax1.grid(alpha=0.3)
    if ax2.get_legend_handles_labels()[0]:
        log_ms_axis(ax2)
        ax2.legend(fontsize=7, ncol=2, loc="best")
    else:
        ax2.text(0.5, 0.5, "no consumed messages: no latency", ha="center", transform=ax2.transAxes, color="grey")
    ax2.set_ylabel("end-to-end latency")
    ax2.set_xlabel("seconds since the first step started" + (" (probes at their real start times)" if search else ""))
    ax2.set_title("End-to-end latency (t_received − t_intended) per 1 s bucket of t_received", fontsize=10)
    ax2.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
