"""PNG plots of a reduce (matplotlib, Agg backend; no Spark, no display).

Capacity studies read rates against the offered load, so every per-step plot has the target
rate in msg/s on its x axis (logarithmic when the targets span a wide range, as a doubling
search does), and latency is also drawn against the achieved throughput: the curve that
bends upwards at the knee. Colour = cluster everywhere, so one legend reads across all
figures; each cluster also has its own marker shape and size and is nudged slightly sideways,
so clusters with identical figures stay visible on top of each other. Latency axes are
logarithmic because a saturated cluster's tail is orders of magnitude above a healthy median.

The per-second timeline draws throughput only for whole seconds inside a run's schedule: a
second the run covered only in part (the last, usually) would read as a drop that never
happened; a whole second without a single message is a real zero and is drawn as one.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

from rbench.samples.conventions import shown_step

Row = dict[str, Any]
STYLES = {"p50": "-", "p75": "--", "p95": "-", "p99": "--", "p999": ":"}
TITLES = {"e2e": "end-to-end (t_received − t_intended)", "e2e_sent": "t_received − t_sent",
          "confirm": "confirm (t_confirmed − t_sent)", "send_lag": "send lateness (t_sent − t_intended)"}
LABELS = {"p50": "p50", "p75": "p75", "p95": "p95", "p99": "p99", "p999": "p99.9"}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
SLO_COLOR = "#c0392b"
LOG_SPAN = 8.0              # targets spanning at least this ratio get a log x axis


def _series_name(row: Row, multi_run: bool) -> str:
    return f"{row['cluster']} ({row['run_id'][-12:]})" if multi_run else str(row["cluster"])


def series_of(rows: list[Row], search: bool = False) -> dict[tuple[str, str], str]:
    """(run_id, cluster) → the series a row belongs to: the cluster's name, with its run when a cluster
    appears in several runs that are not one rate search's probes (those are one series per cluster)."""
    runs: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        runs[str(r["cluster"])].add(str(r["run_id"]))
    return {(str(r["run_id"]), str(r["cluster"])):
            f"{r['cluster']} ({str(r['run_id'])[-12:]})" if len(runs[str(r["cluster"])]) > 1 and not search
            else str(r["cluster"]) for r in rows}


def _colors(names: list[str]) -> dict[str, Any]:
    cmap = plt.get_cmap("tab10")
    return {n: cmap(i % 10) for i, n in enumerate(names)}


@dataclass(frozen=True)
class Look:
    """How one series is drawn: colour, marker, marker size (larger first, so smaller ones stay on top), nudge."""

    color: Any
    marker: str
    size: float
    nudge: float          # multiplicative on a log axis, additive in axis units on a linear one
    zorder: int


def looks(names: list[str], log: bool, span: float) -> dict[str, Look]:
    """Distinct markers, decreasing sizes and a slight sideways nudge per series."""
    colors = _colors(names)
    n = len(names)
    out = {}
    for i, name in enumerate(names):
        centred = i - (n - 1) / 2
        nudge = 1.0 + 0.025 * centred if log else 0.012 * span * centred
        out[name] = Look(colors[name], MARKERS[i % len(MARKERS)], max(4.5, 9.0 - 1.2 * i), nudge, 3 + i)
    return out


def widths(names: list[str]) -> dict[str, float]:
    """Line widths from wide to thin in drawing order, so a line drawn over an identical one leaves it visible."""
    n = len(names)
    return {name: 1.5 + 2.0 * (n - 1 - i) / (n - 1) if n > 1 else 1.5 for i, name in enumerate(names)}


def _rate_fmt(v: float, _pos: Any = None) -> str:
    if abs(v) >= 1000:
        return f"{v / 1000:.3g}k"
    return f"{v:.3g}"


def _rate_axis(axis: Any, log: bool) -> None:
    """msg/s tick labels (250, 1.5k); on a log axis spanning under ~1.5 decades the minor ticks are labelled too."""
    axis.set_major_formatter(FuncFormatter(_rate_fmt))
    if log:
        lo, hi = axis.get_view_interval()
        axis.set_minor_formatter(FuncFormatter(_rate_fmt) if lo > 0 and hi / lo < 30 else NullFormatter())


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


def step_ticks(steps: list[Row]) -> tuple[list[int], list[str]]:
    """x positions and labels when no step has a target: "step N" counted from 1, and the step's target."""
    targets = {shown_step(s["step"]): s["target_rate"] for s in steps if s["target_rate"] is not None}
    xs = sorted({shown_step(s["step"]) for s in steps})
    return xs, [f"step {i}\n{_rate_fmt(targets[i]) + '/s' if targets.get(i) else 'unlimited'}" for i in xs]


@dataclass(frozen=True)
class XAxis:
    """The per-step plots' x axis: the target rate in msg/s (unlimited steps to the right of the highest),
    or the step number when no step had a target."""

    by_target: bool
    log: bool
    targets: tuple[float, ...]
    unlimited_at: float | None
    steps: tuple[tuple[int, str], ...] = field(default=())

    @classmethod
    def of(cls, steps: list[Row]) -> XAxis:
        targets = tuple(sorted({float(s["target_rate"]) for s in steps if s.get("target_rate")}))
        if not targets:
            xs, labels = step_ticks(steps)
            return cls(False, False, (), None, tuple(zip(xs, labels)))
        log = targets[-1] / targets[0] >= LOG_SPAN
        unlimited = None
        if any(not s.get("target_rate") for s in steps):
            unlimited = targets[-1] * 1.6 if log else targets[-1] + max((targets[-1] - targets[0]) / 4, targets[-1] * 0.15)
        return cls(True, log, targets, unlimited)

    def x(self, row: Row) -> float:
        if not self.by_target:
            return float(shown_step(row["step"]))
        return float(row["target_rate"]) if row.get("target_rate") else float(self.unlimited_at or 0.0)

    @property
    def span(self) -> float:
        if not self.by_target:
            return float(max((x for x, _ in self.steps), default=1) - min((x for x, _ in self.steps), default=0) or 1)
        hi = self.unlimited_at or self.targets[-1]
        return float(hi - self.targets[0] or hi)

    def nudged(self, x: float, look: Look) -> float:
        return x * look.nudge if self.log else x + look.nudge

    def apply(self, ax: Any) -> None:
        if not self.by_target:
            ax.set_xticks([x for x, _ in self.steps], [label for _, label in self.steps])
            ax.set_xlabel("step (no target rate)")
            return
        if self.log:
            ax.set_xscale("log")
        ticks = list(self.targets)
        if len(ticks) > 12:        # a long search: every other probe rate, by magnitude
            ticks = ticks[:: math.ceil(len(ticks) / 12)]
        labels = [_rate_fmt(t) for t in ticks]
        if self.unlimited_at is not None:
            ticks.append(self.unlimited_at)
            labels.append("unlimited")
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: dict(zip(ticks, labels)).get(v, _rate_fmt(v))))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("target rate, msg/s" + (" (log scale)" if self.log else ""))


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
    _rate_axis(ax.yaxis, axis.log)
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
        ax.axhline(slo_ms, color=SLO_COLOR, lw=1.2, ls="-.", alpha=0.8, label=f"SLO p99 ≤ {_ms_fmt(slo_ms)}")


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
            _log_ms_axis(ax)
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
        _log_ms_axis(ax)
        ax.legend(fontsize=8, ncol=2, loc="upper left")
    else:
        ax.text(0.5, 0.5, "no latency (nothing consumed)", ha="center", transform=ax.transAxes, color="grey")
    if log:
        ax.set_xscale("log")
    _rate_axis(ax.xaxis, log)
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


def probes_plot(search: dict[str, Any], path: Path) -> Path:
    """A rate search's probes in the order they ran: rate per probe, met (filled) or failed (cross), the bracket shaded."""
    clusters = [c for c in search.get("clusters", []) if c.get("probes")]
    names = [str(c["cluster"]) for c in clusters]
    colors = _colors(sorted(names))
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
            ax.annotate(_rate_fmt(p["target"]), (x, p["target"]), textcoords="offset points", xytext=(6, 4), fontsize=7,
                        color=color)
        lo, hi = c.get("highest_pass"), c.get("first_fail")
        if lo is not None and hi is not None:
            ax.axhspan(lo, hi, color=color, alpha=0.12, lw=0)
        elif lo is not None:
            ax.axhline(lo, color=color, ls=":", lw=1)
        ax.plot([], [], color=color, marker="o", ls="-", lw=1,
                label=f"{c['cluster']}: " + (f"met {_rate_fmt(lo)}/s" if lo is not None else "met none")
                + (f", failed {_rate_fmt(hi)}/s" if hi is not None else ""))
    ax.plot([], [], marker="o", color="grey", ls="none", label="met the SLO")
    ax.plot([], [], marker="X", color="grey", mec="black", ls="none", label="failed")
    if any(p.get("generator") for c in clusters for p in c["probes"]):
        ax.plot([], [], marker="^", color="black", mfc="none", ls="none", label="generator was the limit")
    if log:
        ax.set_yscale("log")
    _rate_axis(ax.yaxis, log)
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
    colors = _colors(list(series))
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
    ax1.yaxis.set_major_formatter(FuncFormatter(_rate_fmt))
    ax1.set_ylim(bottom=0)
    ax1.set_ylabel("msg/s (1 s buckets)")
    ax1.set_title("Throughput per whole second of the schedule (publish by t_sent, consume by t_received); "
                  "dotted = step starts, grey = warm-up"
                  + ("\nred = a fault until the node was back, darker = node down" if faults else ""), fontsize=10)
    if ax1.get_legend_handles_labels()[0]:
        ax1.legend(fontsize=7, ncol=2, loc="best")
    ax1.grid(alpha=0.3)
    if ax2.get_legend_handles_labels()[0]:
        _log_ms_axis(ax2)
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
