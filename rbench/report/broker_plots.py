"""Broker panels (queue depth, memory, CPU) under the client's throughput, on one time axis.

x = seconds since the cluster's t0 in every panel, as in the client timeline, so a latency spike,
a depth ramp and a memory peak line up. Dotted verticals mark consumer.pause phases.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from rbench.report.fault_plots import FAULT_COLOR, shade_fault
from rbench.report.plot_style import rate_fmt, series_colors, widths
from rbench.report.timeline_plots import placement, timeline_series


def broker_plot(timeline: list[dict[str, Any]], broker: list[dict[str, Any]], phases: list[dict[str, Any]],
                path: Path, steps: list[dict[str, Any]] | None = None, search: bool = False,
                faults: list[dict[str, Any]] | None = None) -> Path:
    """Client throughput, then the broker's queue depth, memory and CPU, sharing the x axis; faults shaded
    as on the client timeline (rbench.report.fault_plots.shade_fault).

    The client panel draws what the timeline plot draws (rbench.report.timeline_plots.timeline_series:
    whole seconds of the schedule only); a rate search's probes sit at their real start times."""
    steps = steps or []
    where = placement(steps, [*timeline, *broker], search)
    client = timeline_series(timeline, steps, search)
    series: dict[str, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
    last: dict[str, tuple[str, str]] = {}
    gap = {"depth": math.nan, "memory_bytes": math.nan, "cpu_cores": math.nan}
    for r in sorted(broker, key=lambda r: (where[(str(r["run_id"]), str(r["cluster"]))], r["second"])):
        key = (str(r["run_id"]), str(r["cluster"]))
        name, shift = where[key]
        if last.setdefault(name, key) != key:          # the next probe: a gap, not a line across it
            series[name].append((math.nan, gap))
            last[name] = key
        series[name].append((r["second"] + shift, r))
    colors = series_colors(sorted(set(series) | set(client)))
    fig, axes = plt.subplots(4, 1, figsize=(12, 10), dpi=110, sharex=True)
    ax_rate, ax_depth, ax_mem, ax_cpu = axes
    wide = widths(list(client))
    for name, ts in client.items():
        ax_rate.plot(ts.throughput_x, ts.consumed, color=colors[name], lw=wide[name], alpha=0.75, label=f"{name}: consumed/s")
        ax_rate.plot(ts.throughput_x, ts.published, color=colors[name], lw=0.8, ls="--", label=f"{name}: published/s")
    for name, points in series.items():
        for ax, column, scale in ((ax_depth, "depth", 1.0), (ax_mem, "memory_bytes", 1 / 2**20), (ax_cpu, "cpu_cores", 1.0)):
            pts = [(x, r[column] * scale) for x, r in points if r.get(column) is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[name], lw=1.3, marker=".", ms=3, label=name)
    for p in phases:
        for ax in axes:
            ax.axvline(p["start_s"], color="grey", lw=0.8, ls=":")
        ax_rate.annotate(p["phase"], (p["start_s"], 1.0), xycoords=("data", "axes fraction"), fontsize=8,
                         color="grey", va="top", ha="left")
    right = max([r["second"] + 1 for r in timeline] + [r["second"] for r in broker], default=0)
    for f in faults or []:
        for ax in axes:
            shade_fault(ax, f, 0.0, right)
        ax_rate.annotate(f"{f['action']} {f['node']}", (f["at_s"], 0.02), xycoords=("data", "axes fraction"), fontsize=8,
                         color=FAULT_COLOR, va="bottom", ha="left", rotation=90)
    ax_rate.set_ylabel("msg/s (client)")
    ax_rate.yaxis.set_major_formatter(FuncFormatter(rate_fmt))
    ax_rate.set_title("Client throughput and the broker's side, on the client's time axis")
    ax_depth.set_ylabel("queue depth (msgs)")
    ax_depth.yaxis.set_major_formatter(FuncFormatter(rate_fmt))
    ax_mem.set_ylabel("broker memory (MiB)")
    ax_cpu.set_ylabel("broker CPU (cores)")
    ax_cpu.set_xlabel("seconds since the cluster's first step started")
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right")
    if not broker:
        ax_depth.text(0.5, 0.5, "no broker samples", ha="center", transform=ax_depth.transAxes, color="grey")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
