"""regress.md and a self-contained regress.html (trend plots embedded), and `history show`'s plot.

Plain rows in, files out: no Spark. Every figure says how it was judged (method and alpha).
"""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from rbench.errors import SinkError
from rbench.history.regress import Finding, Result, format_p
from rbench.report.figures import fmt
from rbench.samples.conventions import shown_step

METHOD = ("same-morning gate: the last k nights (k = 1..{recent}, ending tonight) against up to {baseline} nights before "
          "them, largest t statistic (on log values for latencies, on the values for rates), critical value from the statistic's null distribution (independent "
          "normal nights on that scale; seeded Monte-Carlo, 200,000 draws): false-alarm rate {alpha:g} per series per night. "
          "Change points: binary segmentation of the mean on the same scale, each split kept at permutation p <= {cp_alpha:g} "
          "({perms} permutations). A regression also needs a change of at least {drop:.0%} (throughput) / {rise:.0%} "
          "(latency). docs/history.md")


def method_text(result: Result) -> str:
    t = result.thresholds
    return METHOD.format(recent=t.recent_nights, baseline=t.baseline_nights, alpha=t.alpha, cp_alpha=t.change_point_alpha,
                         perms=t.permutations, drop=t.min_throughput_drop, rise=t.min_latency_rise)


def _night_meta(f: Finding, index: int | None) -> str:
    if index is None or not f.runs:
        return "–"
    m = f.runs[index]
    parts = [f"{m['night']}", f"run {m['run_id']}"]
    for key, name in (("commit", "commit"), ("broker_version", "broker"), ("rbench_version", "rbench"),
                      ("workload_hash", "workload"), ("instance_type", "instance")):
        if m.get(key):
            parts.append(f"{name} {m[key]}")
    if m.get("nodes"):
        parts.append(f"{m['nodes']} node(s)")
    return ", ".join(parts)


def _row(f: Finding) -> list[str]:
    g = f.gate
    tonight = fmt(f.values[-1], f.metric) if f.values else "–"
    base = fmt(g.baseline_mean, f.metric) if g else "–"
    change = f"{g.change:+.1%}" if g else "–"
    p = format_p(g.p_value).lstrip("= ") if g else "–"
    status = "**REGRESSION**" if f.status == "regression" else f.status
    if f.status == "regression" and f.broker_change:
        status += f" ({f.broker_change})"
    return [f.cluster, str(shown_step(f.step)), f.metric, str(len(f.values)), tonight, base, change, p, status]


HEADER = ["cluster", "step", "metric", "nights", "tonight", "baseline mean", "recent change", "gate p", "status"]


def markdown(result: Result) -> str:
    t = result.tonight
    regs = result.regressions
    n = len(result.findings)
    lines = [f"# rbench regress: {result.workload}, tonight {t['night']} ({t['run_id']})", ""]
    lines.append(result.headline())
    lines += ["", f"Expected false alarms per night from the gate: at most {n} series × {result.thresholds.alpha:g} = "
              f"{n * result.thresholds.alpha:.2f}.", ""]
    if result.skipped_hashes:
        lines += [f"{result.skipped_hashes} earlier run(s) of another workload hash were left out (--any-hash includes them).", ""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(_row(f)) + " |" for f in sorted(result.findings, key=lambda f: f.status != "regression")]
    if regs:
        lines += ["", "## Regressions", ""]
        for f in regs:
            lines.append(f"- **{f.label}**: {f.reason}. Shift began: {_night_meta(f, f.night_of_change)}.")
    cps = [(f, c) for f in result.findings for c in f.change_points]
    if cps:
        lines += ["", "## Change points over the whole history", ""]
        for f, c in cps:
            lines.append(f"- {f.label}: from {f.nights[c.index]} {c.change:+.1%} "
                         f"({fmt(c.before, f.metric)} → {fmt(c.after, f.metric)}, permutation p = {c.p_value:.3f}); "
                         f"{_night_meta(f, c.index)}")
    lines += ["", "## Method", "", method_text(result), ""]
    return "\n".join(lines)


def trend_png(f: Finding) -> bytes:
    fig, ax = plt.subplots(figsize=(8, 2.8), dpi=90)
    x = list(range(len(f.values)))
    ax.plot(x, f.values, marker="o", ms=3, lw=1, color="tab:blue", label=f.metric)
    g = f.gate
    if g is not None:
        lo = len(f.values) - g.recent - g.baseline_nights
        ax.hlines(g.baseline_mean, lo, len(f.values) - g.recent - 1, colors="grey", linestyles="dashed", label="baseline")
    for c in f.change_points:
        ax.axvline(c.index - 0.5, color="tab:orange", lw=1, ls=":")
    if f.status == "regression" and f.night_of_change is not None:
        ax.axvspan(f.night_of_change - 0.5, len(f.values) - 0.5, color="tab:red", alpha=0.12, label="regression")
    step = max(1, len(x) // 10)
    ax.set_xticks(x[::step], [f.nights[i][5:] for i in x[::step]], fontsize=7)
    ax.set_title(f"{f.label}", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def html_page(result: Result, md_rows: str | None = None, plot_all: bool = False) -> str:
    t = result.tonight
    regs = result.regressions
    e = html.escape
    head = (f"<!doctype html><html><head><meta charset='utf-8'><title>rbench regress {e(result.workload)}</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:2px 6px;font-size:13px}.bad{color:#b00;font-weight:bold}</style></head><body>")
    body = [f"<h1>rbench regress: {e(result.workload)}, tonight {e(str(t['night']))} ({e(t['run_id'])})</h1>"]
    body.append(f"<p class='bad'>REGRESSION in {len(regs)} of {len(result.findings)} series</p>" if regs
                else f"<p>{e(result.headline())}</p>")
    body.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in HEADER) + "</tr>")
    for f in sorted(result.findings, key=lambda f: f.status != "regression"):
        cells = _row(f)
        cells[-1] = f.status
        cls = " class='bad'" if f.status == "regression" else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>")
    body.append("</table>")
    shown = [f for f in result.findings if plot_all or f.status == "regression" or f.change_points]
    for f in shown:
        body.append(f"<h3>{e(f.label)}: {e(f.status)}</h3><p>{e(f.reason)}</p>")
        if f.status == "regression":
            body.append(f"<p>Shift began: {e(_night_meta(f, f.night_of_change))}</p>")
        if f.values:
            body.append(f"<img alt='{e(f.label)}' src='data:image/png;base64,{base64.b64encode(trend_png(f)).decode()}'>")
    body.append(f"<h2>Method</h2><p>{e(method_text(result))}</p></body></html>")
    return head + "\n".join(body)


def write(result: Result, out_dir: Path) -> tuple[Path, Path]:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        md, page = out_dir / "regress.md", out_dir / "regress.html"
        md.write_text(markdown(result))
        page.write_text(html_page(result))
    except OSError as exc:
        raise SinkError(f"{out_dir}: cannot write the regress summary ({exc.strerror})") from None
    return md, page


def history_plot(series: dict[str, tuple[list[str], list[float]]], metric: str, path: Path) -> Path:
    """One line per (cluster, step) over the nights."""
    nights = sorted({n for xs, _ in series.values() for n in xs})
    pos = {n: i for i, n in enumerate(nights)}
    fig, ax = plt.subplots(figsize=(9, 3.5), dpi=90)
    for name, (xs, ys) in sorted(series.items()):
        ax.plot([pos[n] for n in xs], ys, marker="o", ms=3, lw=1, label=name)
    step = max(1, len(nights) // 12)
    ax.set_xticks(list(range(len(nights)))[::step], nights[::step], fontsize=7, rotation=30)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} over nights (from each night's reduce)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise SinkError(f"{path}: cannot write the plot ({exc.strerror})") from None
    finally:
        plt.close(fig)
    return path
