"""The per-step plots of a report: achieved rate, latency percentiles and the knee.

Capacity studies read rates against the offered load, so every per-step plot has the target rate in
msg/s on its x axis (logarithmic when the targets span a wide range, as a doubling search does), and
latency is also drawn against the achieved throughput: the curve that bends upwards at the knee.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from rbench.report.plot_style import LOG_SPAN, Row, XAxis, log_ms_axis, looks, ms_fmt, rate_axis, series_of

STYLES = {"p50": "-", "p75": "--", "p95": "-", "p99": "--", "p999": ":"}
TITLES = {"e2e": "end-to-end (t_received − t_intended)", "e2e_sent": "t_received − t_sent",
          "confirm": "confirm (t_confirmed − t_sent)", "send_lag": "send lateness (t_sent − t_intended)"}
LABELS = {"p50": "p50", "p75": "p75", "p95": "p95", "p99": "p99", "p999": "p99.9"}
SLO_COLOR = "#c0392b"


def _by_series(steps: list[Row], search: bool) -> dict[str, list[Row]]:
    names = series_of(steps, search)
    groups: dict[str, list[Row]] = defaultdict(list)
    for s in sorted(steps, key=lambda r: (r["cluster"], r.get("target_rate") is None, r.get("target_rate") or 0.0,
                                          r["run_id"], r["step"])):
        groups[names[(str(s["run_id"]), str(s["cluster"]))]].append(s)
    return dict(sorted(groups.items()))


def throughput_plot(steps: list[Row], path: Path, search: bool = False) -> Path:
    """Achieved consume (solid) and publish (dashed) rate against the target rate; filled marker = matched."""
    groups = _by_series(steps, search)
    axis = XAxis.of(steps)
    look = looks(list(groups), axis.log, axis.span)
    fig, ax = plt.subplots(figsize=(8, 5.2), dpi=110)
    if axis.by_target:
        ax.plot(axis.targets, axis.targets, color="black", ls=":", lw=1.3, label="target (achieved = offered)", zorder=2)
    for name, rows in groups.items():
        lk = look[name]
        xs = [axis.nudged(axis.x(r), lk) for r in rows]
        ys = [r.get("consume_rate") or 0.0 for r in rows]
        ax.plot(xs, ys, color=lk.color, lw=1.8, alpha=0.85, zorder=lk.zorder, label=f"{name}: consumed")
        ax.plot(xs, [r.get("publish_rate") or 0.0 for r in rows], color=lk.color, lw=1, ls="--", alpha=0.6,
                zorder=lk.zorder, label=f"{name}: published")
        for x, y, r in zip(xs, ys, rows):
            ax.plot(x, y, marker=lk.marker, ms=lk.size, color=lk.color, mec=lk.color, zorder=lk.zorder + 10,
                    mfc=lk.color if r.get("matched") else "white", alpha=0.9)
    axis.apply(ax)
    if axis.log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    rate_axis(ax.yaxis, axis.log)
    ax.tick_params(labelsize=9)
    ax.set_ylabel("achieved msg/s (measurement window)", fontsize=10)
    ax.set_title("Achieved against target rate\n(filled marker = met the SLO, open = failed; dashed = published)", fontsize=11)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _slo_line(ax: Any, slo_ms: float | None) -> None:
    if slo_ms:
        ax.axhline(slo_ms, color=SLO_COLOR, lw=1.2, ls="-.", alpha=0.8, label=f"SLO p99 ≤ {ms_fmt(slo_ms)}")


def latency_plot(steps: list[Row], path: Path, metric: str = "e2e", search: bool = False,
                 slo_ms: float | None = None) -> Path:
    """Two panels: p50/p75 and p95/p99/p99.9 against the target rate, one colour per cluster, log scale."""
    groups = _by_series(steps, search)
    axis = XAxis.of(steps)
    look = looks(list(groups), axis.log, axis.span)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), dpi=110, sharey=False)
    for ax, pcts, title in ((axes[0], ["p50", "p75"], "median and p75"), (axes[1], ["p95", "p99", "p999"], "tail: p95, p99, p99.9")):
        for name, rows in groups.items():
            lk = look[name]
            for p in pcts:
                pts = [(axis.nudged(axis.x(r), lk), r[f"{metric}_{p}_ms"]) for r in rows
                       if r.get(f"{metric}_{p}_ms") is not None]
                if pts:
                    ax.plot([x for x, _ in pts], [y for _, y in pts], color=lk.color, ls=STYLES[p], marker=lk.marker,
                            ms=lk.size * 0.6, lw=2 if p in ("p50", "p99") else 1.3, alpha=0.85, zorder=lk.zorder,
                            label=f"{name} {LABELS[p]}")
        if metric == "e2e" and "p99" in pcts:
            _slo_line(ax, slo_ms)
        has_data = bool(ax.get_legend_handles_labels()[0])
        if has_data:
            log_ms_axis(ax)
        axis.apply(ax)
        ax.set_title(f"{TITLES.get(metric, metric)}: {title}", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        if has_data:
            ax.legend(fontsize=7, ncol=2)
        else:
            ax.text(0.5, 0.5, "no values (nothing consumed / confirmed)", ha="center", transform=ax.transAxes, color="grey")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def knee_plot(steps: list[Row], path: Path, search: bool = False, slo_ms: float | None = None) -> Path:
    """End-to-end p50 (solid) and p99 (dashed) against the achieved consume rate, points joined in the order of
    the target rate: where the curve turns up is the knee, the rate beyond which queueing sets the latency."""
    groups = _by_series(steps, search)
    rates = [r["consume_rate"] for r in steps if r.get("consume_rate")]
    log = bool(rates) and max(rates) / min(rates) >= LOG_SPAN
    span = (max(rates) - min(rates)) if rates else 1.0
    look = looks(list(groups), log, span or 1.0)
    fig, ax = plt.subplots(figsize=(8, 5.2), dpi=110)
    for name, rows in groups.items():
        lk = look[name]
        # in the order of the offered load (rows come sorted by target): past saturation the achieved rate
        # stalls or falls back while the latency climbs, and the line shows it instead of zigzagging
        pts: list[tuple[float, float, float, bool]] = [
            (float(r["consume_rate"]), float(r["e2e_p50_ms"] if r.get("e2e_p50_ms") is not None else math.nan),
             float(r["e2e_p99_ms"]), bool(r.get("matched")))
            for r in rows if r.get("consume_rate") and r.get("e2e_p99_ms") is not None]
        if not pts:
            continue
        xs = [x * lk.nudge if log else x + lk.nudge for x, _, _, _ in pts]
        ax.plot(xs, [p50 for _, p50, _, _ in pts], color=lk.color, lw=1.3, alpha=0.7, marker=lk.marker, ms=lk.size * 0.55,
                zorder=lk.zorder, label=f"{name} p50")
        ax.plot(xs, [p99 for _, _, p99, _ in pts], color=lk.color, lw=2, ls="--", alpha=0.85, zorder=lk.zorder,
                label=f"{name} p99")
        for x, (_, _, p99, ok) in zip(xs, pts):
            ax.plot(x, p99, marker=lk.marker, ms=lk.size, color=lk.color, mfc=lk.color if ok else "white",
                    zorder=lk.zorder + 10)
    _slo_line(ax, slo_ms)
    if ax.get_legend_handles_labels()[0]:
        log_ms_axis(ax)
        ax.legend(fontsize=8, ncol=2, loc="upper left")
    else:
        ax.text(0.5, 0.5, "no latency (nothing consumed)", ha="center", transform=ax.transAxes, color="grey")
    if log:
        ax.set_xscale("log")
    rate_axis(ax.xaxis, log)
    ax.tick_params(labelsize=9)
    ax.set_xlabel("achieved consume rate, msg/s" + (" (log scale)" if log else ""), fontsize=10)
    ax.set_ylabel("end-to-end latency (from intended send)", fontsize=10)
    ax.set_title("Latency against achieved throughput: the knee is where p99 turns up\n"
                 "(p50 solid, p99 dashed; filled = met the SLO)", fontsize=11)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
