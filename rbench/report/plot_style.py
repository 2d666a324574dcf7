"""What every plot of a report shares (matplotlib, Agg backend; no Spark, no display): series names,
colours, markers, the msg/s and ms axes, and the per-step plots' x axis.

Colour = cluster everywhere, so one legend reads across all figures; each cluster also has its own
marker shape and size and is nudged slightly sideways, so clusters with identical figures stay
visible on top of each other. Latency axes are logarithmic because a saturated cluster's tail is
orders of magnitude above a healthy median.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

from rbench.samples.conventions import shown_step

Row = dict[str, Any]
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
LOG_SPAN = 8.0              # targets spanning at least this ratio get a log x axis


def series_of(rows: list[Row], search: bool = False) -> dict[tuple[str, str], str]:
    """(run_id, cluster) → the series a row belongs to: the cluster's name, with its run when a cluster
    appears in several runs that are not one rate search's probes (those are one series per cluster)."""
    runs: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        runs[str(r["cluster"])].add(str(r["run_id"]))
    return {(str(r["run_id"]), str(r["cluster"])):
            f"{r['cluster']} ({str(r['run_id'])[-12:]})" if len(runs[str(r["cluster"])]) > 1 and not search
            else str(r["cluster"]) for r in rows}


def series_colors(names: list[str]) -> dict[str, Any]:
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
    colors = series_colors(names)
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


def rate_fmt(v: float, _pos: Any = None) -> str:
    if abs(v) >= 1000:
        return f"{v / 1000:.3g}k"
    return f"{v:.3g}"


def rate_axis(axis: Any, log: bool) -> None:
    """msg/s tick labels (250, 1.5k); on a log axis spanning under ~1.5 decades the minor ticks are labelled too."""
    axis.set_major_formatter(FuncFormatter(rate_fmt))
    if log:
        lo, hi = axis.get_view_interval()
        axis.set_minor_formatter(FuncFormatter(rate_fmt) if lo > 0 and hi / lo < 30 else NullFormatter())


def ms_fmt(v: float, _pos: Any = None) -> str:
    if v >= 1000:
        return f"{v / 1000:g} s"
    if v >= 1:
        return f"{v:g} ms"
    return f"{v * 1000:g} µs"


def log_ms_axis(ax: Any) -> None:
    """Log y axis labelled in µs/ms/s; label minor ticks too when the data spans under ~1 decade."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(ms_fmt))
    lo, hi = ax.get_ylim()
    ax.yaxis.set_minor_formatter(FuncFormatter(ms_fmt) if lo > 0 and hi / lo < 20 else NullFormatter())
    ax.tick_params(axis="y", which="minor", labelsize=7)


def step_ticks(steps: list[Row]) -> tuple[list[int], list[str]]:
    """x positions and labels when no step has a target: "step N" counted from 1, and the step's target."""
    targets = {shown_step(s["step"]): s["target_rate"] for s in steps if s["target_rate"] is not None}
    xs = sorted({shown_step(s["step"]) for s in steps})
    return xs, [f"step {i}\n{rate_fmt(targets[i]) + '/s' if targets.get(i) else 'unlimited'}" for i in xs]


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
        labels = [rate_fmt(t) for t in ticks]
        if self.unlimited_at is not None:
            ticks.append(self.unlimited_at)
            labels.append("unlimited")
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: dict(zip(ticks, labels)).get(v, rate_fmt(v))))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("target rate, msg/s" + (" (log scale)" if self.log else ""))
