"""PNG plots of a reduce (matplotlib, Agg backend; no Spark, no display).

Colour = cluster everywhere, so one legend reads across all figures; line style =
percentile. Latency axes are logarithmic because a saturated cluster's tail is
orders of magnitude above a healthy one's median.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, NullFormatter

from rbench.samples.conventions import shown_step

STYLES = {"p50": "-", "p75": "--", "p95": "-", "p99": "--", "p999": ":"}
TITLES = {"e2e": "end-to-end (t_received − t_intended)", "e2e_sent": "t_received − t_sent",
          "confirm": "confirm (t_confirmed − t_sent)", "send_lag": "send lateness (t_sent − t_intended)"}
LABELS = {"p50": "p50", "p75": "p75", "p95": "p95", "p99": "p99", "p999": "p99.9"}


def _series_name(row: dict[str, Any], multi_run: bool) -> str:
    return f"{row['cluster']} ({row['run_id'][-12:]})" if multi_run else str(row["cluster"])


def _colors(names: list[str]) -> dict[str, Any]:
    cmap = plt.get_cmap("tab10")
    return {n: cmap(i % 10) for i, n in enumerate(names)}


def _rate_fmt(v: float, _pos: Any = None) -> str:
    return f"{v / 1000:g}k" if abs(v) >= 1000 else f"{v:g}"


def _ms_fmt(v: float, _pos: Any = None) -> str:
    if v >= 1000:
        return f"{v / 1000:g} s"
    if v >= 1:
        return f"{v:g} ms"
    return f"{v * 1000:g} µs"


def _log_ms_axis(ax: Any) -> None:
    """Log y axis labelled in µs/ms/s; label minor ticks too when the data spans under ~1 decade."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(_ms_fmt))
    lo, hi = ax.get_ylim()
    ax.yaxis.set_minor_formatter(FuncFormatter(_ms_fmt) if lo > 0 and hi / lo < 20 else NullFormatter())
    ax.tick_params(axis="y", which="minor", labelsize=7)


def _group(steps: list[dict[str, Any]]) -> tuple[dict[str, list[dict[str, Any]]], bool]:
    multi = len({s["run_id"] for s in steps}) > 1
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in sorted(steps, key=lambda r: (r["cluster"], r["run_id"], r["step"])):
        groups[_series_name(s, multi)].append(s)
    return groups, multi


def step_ticks(steps: list[dict[str, Any]]) -> tuple[list[int], list[str]]:
    """x positions and labels of the throughput plot: "step N" counted from 1, and the step's target."""
    targets = {shown_step(s["step"]): s["target_rate"] for s in steps if s["target_rate"] is not None}
    xs = sorted({shown_step(s["step"]) for s in steps})
    return xs, [f"step {i}\n{_rate_fmt(targets[i]) + '/s' if targets.get(i) else 'unlimited'}" for i in xs]


def throughput_plot(steps: list[dict[str, Any]], path: Path) -> Path:
    """Achieved consume rate vs target, per step, one line per cluster; matched steps filled."""
    groups, _ = _group(steps)
    colors = _colors(list(groups))
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    # x = the step number people read (from 1), like every other printed step
    targets = sorted({(shown_step(s["step"]), s["target_rate"]) for s in steps if s["target_rate"] is not None})
    if targets:
        ax.plot([t[0] for t in targets], [t[1] for t in targets], color="black", ls=":", lw=1.5, marker="_", ms=14,
                label="target rate")
    for name, rows in groups.items():
        xs = [shown_step(r["step"]) for r in rows]
        ys = [r["consume_rate"] or 0 for r in rows]
        ax.plot(xs, ys, color=colors[name], lw=2, label=f"{name}: consumed")
        ax.plot(xs, [r["publish_rate"] or 0 for r in rows], color=colors[name], lw=1, ls="--", alpha=0.7,
                label=f"{name}: published")
        for r, y in zip(rows, ys):
            ax.plot(shown_step(r["step"]), y, marker="o", ms=7, color=colors[name], mfc=colors[name] if r.get("matched") else "white")
    ax.set_xticks(*step_ticks(steps))
    ax.yaxis.set_major_formatter(FuncFormatter(_rate_fmt))
    ax.set_ylabel("msg/s (in the measurement window)")
    ax.set_title("Achieved vs target throughput per step (filled marker = target matched)")
    ax.grid(alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def latency_plot(steps: list[dict[str, Any]], path: Path, metric: str = "e2e") -> Path:
    """Two panels: p50/p75 and p95/p99/p99.9 per step, one colour per cluster, log scale."""
    groups, _ = _group(steps)
    colors = _colors(list(groups))
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), dpi=110, sharey=False)
    for ax, pcts, title in ((axes[0], ["p50", "p75"], "median and p75"), (axes[1], ["p95", "p99", "p999"], "tail: p95, p99, p99.9")):
        for name, rows in groups.items():
            for p in pcts:
                pts = [(shown_step(r["step"]), r[f"{metric}_{p}_ms"]) for r in rows if r.get(f"{metric}_{p}_ms") is not None]
                if pts:
                    ax.plot([x for x, _ in pts], [y for _, y in pts], color=colors[name], ls=STYLES[p], marker="o", ms=4,
                            lw=2 if p in ("p50", "p99") else 1.3, label=f"{name} {LABELS[p]}")
        _log_ms_axis(ax)
        ax.set_xticks(sorted({shown_step(s["step"]) for s in steps}))
        ax.set_xlabel("step")
        ax.set_title(f"{TITLES.get(metric, metric)}: {title}", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, ncol=2)
        else:
            ax.text(0.5, 0.5, "no values (nothing consumed / confirmed)", ha="center", transform=ax.transAxes, color="grey")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def timeline_plot(timeline: list[dict[str, Any]], steps: list[dict[str, Any]], path: Path,
                  faults: list[dict[str, Any]] | None = None) -> Path:
    """Per-second throughput and latency within each run, x = seconds since the cluster's t0; each fault of
    ``faults`` (rows of faults.json) shaded from its start until the node was back."""
    multi = len({t["run_id"] for t in timeline}) > 1
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in sorted(timeline, key=lambda r: (r["cluster"], r["run_id"], r["second"])):
        groups[_series_name(t, multi)].append(t)
    colors = _colors(sorted({_series_name(s, multi) for s in steps} | set(groups)))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 7), dpi=110, sharex=True)
    for name, rows in groups.items():
        xs = [r["second"] for r in rows]
        ax1.plot(xs, [r["consumed"] for r in rows], color=colors[name], lw=1.5, label=f"{name}: consumed/s")
        ax1.plot(xs, [r["published"] for r in rows], color=colors[name], lw=0.8, ls="--", alpha=0.7, label=f"{name}: published/s")
        lat = [(r["second"], r["e2e_p99_ms"], r["e2e_p50_ms"]) for r in rows if r.get("e2e_p99_ms") is not None]
        if lat:
            ax2.plot([x for x, _, _ in lat], [y for _, y, _ in lat], color=colors[name], lw=1.5, label=f"{name}: p99")
            ax2.plot([x for x, _, _ in lat], [m for _, _, m in lat], color=colors[name], lw=0.8, ls="--", label=f"{name}: p50")
    # step boundaries (relative to t0), drawn once when all clusters share the schedule
    bounds = sorted({round((s["start_ns"] - s["start_ns"] + _offset(s, steps)) / 1e9, 3) for s in steps})
    warm = max((s.get("warmup_s") or 0.0) for s in steps) if steps else 0.0
    for b in bounds:
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
    ax1.yaxis.set_major_formatter(FuncFormatter(_rate_fmt))
    ax1.set_ylabel("msg/s (1 s buckets)")
    ax1.set_title("Throughput over time (publish by t_sent, consume by t_received); dotted lines = step starts, grey = warm-up (excluded)"
                  + ("\nred = a fault until the node was back, darker = node down" if faults else ""))
    ax1.legend(fontsize=7, ncol=2, loc="upper left")
    ax1.grid(alpha=0.3)
    _log_ms_axis(ax2)
    ax2.set_ylabel("end-to-end latency")
    ax2.set_xlabel("seconds since the cluster's first step started")
    ax2.set_title("End-to-end latency (t_received − t_intended) per 1 s bucket of t_received", fontsize=10)
    if ax2.get_legend_handles_labels()[0]:
        ax2.legend(fontsize=7, ncol=2, loc="upper left")
    else:
        ax2.text(0.5, 0.5, "no consumed messages: no latency", ha="center", transform=ax2.transAxes, color="grey")
    ax2.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _offset(step: dict[str, Any], steps: list[dict[str, Any]]) -> int:
    """Start of ``step`` relative to the first step of its (run, cluster)."""
    first = min(s["start_ns"] for s in steps if s["run_id"] == step["run_id"] and s["cluster"] == step["cluster"])
    return int(step["start_ns"] - first)


FAULT_COLOR = "#c0392b"


def shade_fault(ax: Any, fault: dict[str, Any], origin_s: float, right: float) -> None:
    """Shade a fault on ``ax`` (x in s, ``origin_s`` subtracted): light from its start until the node was
    back, darker while the node was down (end of the action until the restart began); up to ``right``
    (in the axis' x) when the node did not come back during the run."""
    start, end = fault["at_s"] - origin_s, fault["end_s"] - origin_s
    back = right if fault.get("back_s") is None else fault["back_s"] - origin_s
    down_end = right if fault.get("back_start_s") is None else fault["back_start_s"] - origin_s
    ax.axvspan(start, max(back, start), color=FAULT_COLOR, alpha=0.08, lw=0)
    ax.axvspan(end, max(down_end, end), color=FAULT_COLOR, alpha=0.18, lw=0)


def fault_plot(faults: list[dict[str, Any]], path: Path) -> Path:
    """One panel per fault: published, confirmed and consumed per second around it (x = s since the fault's
    start, each 1 s bucket drawn at its middle), the pre-fault mean and its 95 % line, the instant the
    consume rate was back, and the fault shaded as on the timeline."""
    fig, axes = plt.subplots(len(faults), 1, figsize=(12, 3.2 * len(faults)), dpi=110, squeeze=False)
    for ax, f in zip(axes[:, 0], faults):
        pts = f.get("series") or []
        xs = [p["t_s"] + 0.5 for p in pts]
        ax.plot(xs, [p["consumed"] for p in pts], color="tab:blue", lw=1.6, label="consumed/s")
        ax.plot(xs, [p["published"] for p in pts], color="tab:orange", lw=1.0, ls="--", label="published/s")
        ax.plot(xs, [p["confirmed"] for p in pts], color="tab:green", lw=1.0, ls=":", label="confirmed (ack)/s")
        if xs:
            ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
        shade_fault(ax, f, f["at_s"], max(xs) + 0.5 if xs else 0.0)
        if f.get("baseline_consume_rate"):
            ax.axhline(f["baseline_consume_rate"], color="grey", lw=0.8, ls=":", label="pre-fault mean (consumed)")
            ax.axhline(0.95 * f["baseline_consume_rate"], color="grey", lw=0.6, ls="--", label="95 % of it")
        if f.get("consume_back_s") is not None:
            ax.axvline(f["consume_back_s"], color="tab:blue", lw=0.8, ls="-.", label="consume rate back")
        if f.get("first_confirm_s") is not None:
            ax.axvline(f["first_confirm_s"], color="tab:green", lw=0.8, ls="-.", label="first confirm after the fault")
        ax.yaxis.set_major_formatter(FuncFormatter(_rate_fmt))
        ax.set_ylim(bottom=0)
        ax.set_ylabel("msg/s")
        ax.set_title(f"fault {int(f['index']) + 1}: {f['action']} {f['node']} on {f['cluster']} at {f['at_s']:.2f} s "
                     f"(red: until the node was back, darker: node down)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right", ncol=2)
    axes[-1, 0].set_xlabel("seconds since the fault started (1 s buckets since the cluster's t0, drawn at their middle)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
