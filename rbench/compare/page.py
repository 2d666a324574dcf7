"""compare.html: the comparison's table and one plot per compared metric, in the report's look.

Each plot has two panels: left, every round's figure for A and B (x = round, so drift over the
rounds and the ABBA order's effect are visible); right, every round's ratio B/A with the estimate
(the geometric-mean ratio) and its confidence interval as a band, and the line B/A = 1: a band that
crosses the line is "no difference shown". A scalability comparison has a figure per phase and sweep
level (tens of them): its levels get one plot per phase instead, B/A of every level with its interval
as a bar against the line B/A = 1.
"""
from __future__ import annotations

import html
import math
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from rbench.compare.result import Comparison, MetricComparison, PairComparison, markdown
from rbench.compare.targets import file_safe
from rbench.errors import SinkError
from rbench.report.html_parts import CSS, img, md_tables_to_html
from rbench.report.plot_style import looks, rate_fmt


def metric_plot(pair: PairComparison, m: MetricComparison, path: Path) -> Path:
    """The two panels of one metric (module docstring)."""
    style = looks([pair.a, pair.b], log=False, span=1.0)
    rounds = list(range(1, len(m.a) + 1))
    fig, (ax_v, ax_r) = plt.subplots(1, 2, figsize=(10, 3.4), dpi=100, gridspec_kw={"width_ratios": [3, 2]})
    for name, values in ((pair.a, m.a), (pair.b, m.b)):
        look = style[name]
        pts = [(x + look.nudge * 4, v) for x, v in zip(rounds, values) if v is not None]
        ax_v.plot([p[0] for p in pts], [p[1] for p in pts], color=look.color, marker=look.marker, ms=look.size,
                  lw=1.0, alpha=0.85, zorder=look.zorder, label=f"{name} ({'A' if name == pair.a else 'B'})")
    ax_v.set_title(f"{m.metric.label}: each round ({m.metric.better} is better)", fontsize=10)
    ax_v.set_xlabel("round")
    ax_v.set_ylabel(m.metric.unit)
    seen = [v for v in (*m.a, *m.b) if v is not None]
    if seen and min(seen) > 0 and max(seen) / min(seen) > 1.05:
        ax_v.yaxis.set_major_formatter(FuncFormatter(rate_fmt))    # 1.5k; close figures keep their digits below
    else:
        ax_v.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax_v.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_v.legend(fontsize=8)
    ratios = [(x, b / a) for x, a, b in zip(rounds, m.a, m.b) if a and b]
    ax_r.axhline(1.0, color="grey", lw=1, ls="--", label="B/A = 1")
    ax_r.plot([p[0] for p in ratios], [p[1] for p in ratios], "o", color=style[pair.b].color, label="round's B/A")
    e = m.estimate
    if e is not None:
        ax_r.axhspan(e.lo, e.hi, color=style[pair.b].color, alpha=0.15, label=f"{e.confidence * 100:g} % CI")
        ax_r.axhline(e.ratio, color=style[pair.b].color, lw=1.5, label=f"B/A {e.ratio:.3f}")
        lo = min([e.lo, 1.0, *(r for _, r in ratios)])
        hi = max([e.hi, 1.0, *(r for _, r in ratios)])
        pad = max((hi / lo) ** 0.08, 1.002)          # on the log axis: a margin of the span, at least 0.2 %
        ax_r.set_ylim(lo / pad, hi * pad)
    ax_r.set_yscale("log")                           # ratios are factors: 2× and ½× equally far from 1
    lo_y, hi_y = ax_r.get_ylim()
    digits = max(3, 2 + math.ceil(-math.log10(max(hi_y / lo_y - 1, 1e-6))))
    ratio_fmt = FuncFormatter(lambda v, _p: f"{v:.{digits}g}")
    ax_r.yaxis.set_major_formatter(ratio_fmt)
    ax_r.yaxis.set_minor_formatter(ratio_fmt if hi_y / lo_y < 20 else NullFormatter())
    ax_r.tick_params(axis="y", which="minor", labelsize=7)
    ax_r.set_title("B/A per round (log axis), estimate and CI", fontsize=10)
    ax_r.set_xlabel("round")
    ax_r.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_r.legend(fontsize=7)
    for ax in (ax_v, ax_r):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def levels_plot(pair: PairComparison, metrics: list[MetricComparison], path: Path) -> Path:
    """One phase of a sweep comparison: each level's B/A (x: the level, queues and bindings) with its interval."""
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(metrics) + 2), 3.6), dpi=100)
    color = looks([pair.a, pair.b], log=False, span=1.0)[pair.b].color
    xs, labels = list(range(len(metrics))), [m.key.split("@", 1)[-1] for m in metrics]
    ax.axhline(1.0, color="grey", lw=1, ls="--", label="B/A = 1")
    for x, m in zip(xs, metrics):
        e = m.estimate
        if e is None:
            continue
        shown = e.shows_difference
        ax.errorbar([x], [e.ratio], yerr=[[e.ratio - e.lo], [e.hi - e.ratio]], fmt="o", color=color, capsize=3,
                    mfc=color if shown else "white")
    ax.set_yscale("log")
    ax.set_xticks(xs, labels, rotation=60, fontsize=7)
    ax.set_xlabel("level: q = queues, k = bindings per queue")
    ax.set_ylabel(f"B/A ({pair.b} / {pair.a})")
    conf = metrics[0].confidence * 100 if metrics else 95.0
    ax.set_title(f"{metrics[0].metric.name if metrics else ''}: B/A per level, simultaneous intervals "
                 f"({conf:.4g} % each)\nfilled: a difference shown; dashed: B/A = 1", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _is_level(m: MetricComparison) -> bool:
    return any(name == "queues" for name, _ in m.at)


def write_page(c: Comparison) -> Path:
    """compare.html beside compare.json, plots as PNGs in plots/ and inline in the page."""
    plots = c.folder / "plots"
    try:
        plots.mkdir(exist_ok=True)
        parts = [f"<h1>Comparison: {html.escape(c.workload)}</h1>", md_tables_to_html(markdown(c))]
        for pair in c.pairs:
            parts.append(f"<h2>{html.escape(pair.b)} (B) against {html.escape(pair.a)} (A): per metric</h2>")
            shown = [m for m in pair.metrics if any(v is not None for v in (*m.a, *m.b))]
            figures = []
            for m in shown:
                if _is_level(m):
                    continue
                png = metric_plot(pair, m, plots / f"{file_safe(pair.b)}-{m.key.replace('@', '-')}.png")
                figures.append(f"<div><p class='sub'>{html.escape(m.key)}: {html.escape(m.verdict)}</p>"
                               f"{img(png, m.key)}</div>")
                levels = [x for x in shown if _is_level(x) and x.metric.name == m.metric.name]
                if levels:
                    png = levels_plot(pair, levels, plots / f"{file_safe(pair.b)}-{m.metric.name}-levels.png")
                    figures.append(f"<div><p class='sub'>{html.escape(m.metric.name)} per level</p>"
                                   f"{img(png, m.metric.name)}</div>")
            parts.append("<div class='plots'>" + "".join(figures) + "</div>")
        page = c.folder / "compare.html"
        page.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>rbench compare {html.escape(c.workload)}"
                        f"</title><style>{CSS}</style></head><body>{''.join(parts)}</body></html>")
    except OSError as exc:
        raise SinkError(f"{c.folder}: cannot write compare.html ({exc.strerror or exc})") from None
    return page
