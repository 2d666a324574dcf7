"""A rate search's plot: every probe's rate and verdict in the order they ran, the bracket shaded."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from rbench.report.plot_style import LOG_SPAN, rate_axis, rate_fmt, series_colors


def probes_plot(search: dict[str, Any], path: Path) -> Path:
    """A rate search's probes in the order they ran: rate per probe, met (filled) or failed (cross), the bracket shaded."""
    clusters = [c for c in search.get("clusters", []) if c.get("probes")]
    names = [str(c["cluster"]) for c in clusters]
    colors = series_colors(sorted(names))
    rates = [p["target"] for c in clusters for p in c["probes"]]
    log = bool(rates) and max(rates) / min(rates) >= LOG_SPAN
    fig, ax = plt.subplots(figsize=(10, 4.6), dpi=110)
    n = len(clusters)
    for i, c in enumerate(clusters):
        color = colors[str(c["cluster"])]
        dx = 0.12 * (i - (n - 1) / 2)
        probes = c["probes"]
        xs = [k + 1 + dx for k in range(len(probes))]
        ys = [p["target"] for p in probes]
        ax.plot(xs, ys, color=color, lw=1, alpha=0.6, zorder=2)
        for x, p in zip(xs, probes):
            if p.get("generator"):
                ax.plot(x, p["target"], marker="^", ms=11, color="black", mfc="none", zorder=6)
            if p["passed"]:
                ax.plot(x, p["target"], marker="o", ms=9, color=color, zorder=5)
            else:
                ax.plot(x, p["target"], marker="X", ms=10, color=color, mec="black", mew=0.6, zorder=5)
            ax.annotate(rate_fmt(p["target"]), (x, p["target"]), textcoords="offset points", xytext=(6, 4), fontsize=7,
                        color=color)
        lo, hi = c.get("highest_pass"), c.get("first_fail")
        if lo is not None and hi is not None:
            ax.axhspan(lo, hi, color=color, alpha=0.12, lw=0)
        elif lo is not None:
            ax.axhline(lo, color=color, ls=":", lw=1)
        ax.plot([], [], color=color, marker="o", ls="-", lw=1,
                label=f"{c['cluster']}: " + (f"met {rate_fmt(lo)}/s" if lo is not None else "met none")
                + (f", failed {rate_fmt(hi)}/s" if hi is not None else ""))
    ax.plot([], [], marker="o", color="grey", ls="none", label="met the SLO")
    ax.plot([], [], marker="X", color="grey", mec="black", ls="none", label="failed")
    if any(p.get("generator") for c in clusters for p in c["probes"]):
        ax.plot([], [], marker="^", color="black", mfc="none", ls="none", label="generator was the limit")
    if log:
        ax.set_yscale("log")
    rate_axis(ax.yaxis, log)
    ax.set_xticks(range(1, max((len(c["probes"]) for c in clusters), default=1) + 1))
    ax.set_xlabel("probe (in the order it ran)")
    ax.set_ylabel("target rate, msg/s")
    ax.set_title("Rate search: each probe's rate and verdict; shaded = the bracket (last met … first failed)", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
