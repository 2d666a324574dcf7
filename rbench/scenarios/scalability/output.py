"""A sweep's files: rows (Parquet), sweep.json, and the report (tables, three log-log plots, slopes).

Layout under RUN_DIR (= --out/<run_id>/): scalability.parquet (one row per level, phase, repeat and
task), sweep.json (parameters, status, notes), report/scalability.md + report.html + create.png,
route.png, delete.png. `rbench report RUN_DIR` redraws report/ from the first two.

Which figure the plots use: create and delete are the marginal cost per queue of each level (the
queues the level added, or removed, at that population), which is what tells whether a queue costs
more when there are more of them; the cumulative average (all queues of the level built, or
deleted, from nothing) is in the table too. Route is µs per message per bound queue.
"""
from __future__ import annotations

import html
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from rbench.errors import SinkError
from rbench.scenarios.scalability import fit
from rbench.scenarios.scalability.fit import Slope, loglog_slope

ROWS = "scalability.parquet"
SWEEP_JSON = "sweep.json"
PLOTS = {"create": "create.png", "route": "route.png", "delete": "delete.png"}


def _schema() -> Any:
    import pyarrow as pa

    i64, f64, s = pa.int64(), pa.float64(), pa.string()
    return pa.schema([("run_id", s), ("label", s), ("exchange_type", s), ("repeat", i64), ("i", i64), ("j", i64),
                      ("queues", i64), ("bindings", i64), ("added", i64), ("phase", s), ("task", i64), ("tasks", i64),
                      ("ops", i64), ("t_start_ns", i64), ("t_end_ns", i64), ("task_us", f64), ("phase_ops", i64),
                      ("phase_us", f64), ("us_per_op", f64), ("returned", i64), ("nacked", i64),
                      ("routed_expected", i64), ("routed_counted", i64)])


def write_outputs(run_dir: Path, rows: list[dict[str, Any]], sweep_json: dict[str, Any]) -> None:
    """The rows, sweep.json (``sweep_json``: what the sweep was and how it ended) and, with rows, the report.

    Takes the sweep's figures rather than the Sweep itself, so this module does not import the loop
    that calls it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=_schema()), run_dir / ROWS)
    (run_dir / SWEEP_JSON).write_text(json.dumps({**sweep_json, "rows": len(rows)}, indent=2, default=str))
    if rows:
        render(run_dir)


def load(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import pyarrow.parquet as pq

    rows_path, meta_path = run_dir / ROWS, run_dir / SWEEP_JSON
    if not rows_path.is_file() or not meta_path.is_file():
        raise SinkError(f"{run_dir}: not a scalability run ({ROWS} and {SWEEP_JSON} expected)")
    rows: list[dict[str, Any]] = pq.read_table(rows_path).to_pylist()
    meta: dict[str, Any] = json.loads(meta_path.read_text())
    return rows, meta


# ---- figures ---------------------------------------------------------------------------------------
def _phase_values(rows: list[dict[str, Any]]) -> dict[tuple[int, int, int, str], dict[str, Any]]:
    """(repeat, i, j, phase) -> that phase's figures (the same on every task row)."""
    out: dict[tuple[int, int, int, str], dict[str, Any]] = {}
    for r in rows:
        out.setdefault((r["repeat"], r["i"], r["j"], r["phase"]), r)
    return out


def _stats(values: list[float]) -> tuple[float, float, float]:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return math.nan, math.nan, math.nan
    return statistics.median(vals), min(vals), max(vals)


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per level: median, min and max over repeats of every figure."""
    phases = _phase_values(rows)
    per_level: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    shape: dict[tuple[int, int], tuple[int, int]] = {}
    routed_ok: dict[tuple[int, int], list[bool | None]] = defaultdict(list)
    for (rep, i, j, phase), r in phases.items():
        shape[(i, j)] = (r["queues"], r["bindings"])
        vals = per_level[(i, j)]
        vals[phase].append(r["us_per_op"])
        if phase in ("create", "delete"):
            # cumulative: every level of this series up to i, from nothing, per queue of level i
            total = sum(p["phase_us"] for (rep2, i2, j2, ph2), p in phases.items()
                        if rep2 == rep and j2 == j and ph2 == phase and i2 <= i)
            vals[f"{phase}_cum"].append(total / r["queues"])
        if phase == "route":
            vals["route_msg"].append(r["phase_us"] / r["phase_ops"] if r["phase_ops"] else math.nan)
            counted = r["routed_counted"]
            routed_ok[(i, j)].append(None if counted is None else counted == r["routed_expected"])
    out = []
    for (i, j), vals in sorted(per_level.items(), key=lambda kv: (shape[kv[0]][1], shape[kv[0]][0])):
        q, k = shape[(i, j)]
        level: dict[str, Any] = {"i": i, "j": j, "queues": q, "bindings": k, "repeats": len(vals.get("create", []))}
        for key in ("create", "create_cum", "route", "route_msg", "baseline", "delete", "delete_cum"):
            med, lo, hi = _stats(vals.get(key, []))
            level[key], level[f"{key}_min"], level[f"{key}_max"] = med, lo, hi
        oks = routed_ok.get((i, j), [])
        level["routed_ok"] = None if not oks or any(o is None for o in oks) else all(oks)
        out.append(level)
    return out


def slopes(levels: list[dict[str, Any]]) -> dict[str, list[Slope]]:
    """create/delete against queues per bindings count; route against bindings per queue count (on the medians)."""
    out: dict[str, list[Slope]] = {}
    for phase, x, group in (("create", "queues", "bindings"), ("delete", "queues", "bindings"), ("route", "bindings", "queues")):
        groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for lv in levels:
            groups[lv[group]].append(lv)
        out[phase] = [loglog_slope(f"{group}={g}", [float(lv[x]) for lv in pts], [lv[phase] for lv in pts])
                      for g, pts in sorted(groups.items())]
    return out


def pooled_slope(phase: str, levels: list[dict[str, Any]]) -> Slope:
    """One slope over every series, each with its own intercept: the sweep's headline figure for a phase."""
    x, group = ("bindings", "queues") if phase == "route" else ("queues", "bindings")
    groups: dict[int, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for lv in levels:
        xs, ys = groups[lv[group]]
        xs.append(float(lv[x]))
        ys.append(lv[phase])
    return fit.pooled_slope("all", list(groups.values()))


# ---- tables and plots --------------------------------------------------------------------------------
def _f(v: Any, digits: int = 1) -> str:
    return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:,.{digits}f}"


def table_markdown(levels: list[dict[str, Any]]) -> str:
    head = ("| queues | bindings/queue | create µs/queue | create cum. µs/queue | route µs/msg/queue | route µs/msg "
            "| baseline µs/msg | delete µs/queue | delete cum. µs/queue | routed = n×q |")
    lines = [head, "|" + "---:|" * 9 + ":---:|"]
    for lv in levels:
        ok = {True: "yes", False: "NO", None: "–"}[lv["routed_ok"]]
        lines.append(f"| {lv['queues']} | {lv['bindings']} | {_f(lv['create'])} | {_f(lv['create_cum'])} | "
                     f"{_f(lv['route'], 3)} | {_f(lv['route_msg'], 2)} | {_f(lv['baseline'], 2)} | {_f(lv['delete'])} | "
                     f"{_f(lv['delete_cum'])} | {ok} |")
    return "\n".join(lines)


def slopes_markdown(levels: list[dict[str, Any]]) -> str:
    fits = slopes(levels)
    lines = ["| phase | series | points | log-log slope [95% CI] |", "|---|---|---:|---|"]
    for phase in ("create", "delete", "route"):
        pooled = pooled_slope(phase, levels)
        lines.append(f"| **{phase}** | all (pooled) | {pooled.points} | **{pooled.text()}** |")
        for s in fits[phase]:
            lines.append(f"| {phase} | {s.series} | {s.points} | {s.text()} |")
    return "\n".join(lines)


def plot(levels: list[dict[str, Any]], phase: str, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, group = ("bindings", "queues") if phase == "route" else ("queues", "bindings")
    fits = {s.series: s for s in slopes(levels)[phase]}
    groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for lv in levels:
        if math.isfinite(lv[phase]):
            groups[lv[group]].append(lv)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for g, pts in sorted(groups.items()):
        pts.sort(key=lambda lv: lv[x])
        xs = [lv[x] for lv in pts]
        ys = [lv[phase] for lv in pts]
        lo = [max(lv[phase] - lv[f"{phase}_min"], 0) for lv in pts]
        hi = [max(lv[f"{phase}_max"] - lv[phase], 0) for lv in pts]
        line = fits.get(f"{group}={g}")
        slope = f", slope {line.slope:.2f}" if line is not None and math.isfinite(line.slope) else ""
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=4, capsize=3, label=f"{group} = {g}{slope}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("queues" if phase != "route" else "bindings per queue")
    ax.set_ylabel({"create": "µs per queue (with its bindings), marginal", "delete": "µs per queue, marginal",
                   "route": "µs per message per bound queue"}[phase])
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if groups:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render(run_dir: Path) -> Path:
    """report/scalability.md and report.html with the three plots, from the run's files."""
    rows, meta = load(run_dir)
    spec = meta.get("spec", {})
    levels = summary(rows)
    out = run_dir / "report"
    what = (f"-b {spec.get('base')} -x {spec.get('x')} -y {spec.get('y')} -c {spec.get('cap')} -n {spec.get('messages')}, "
            f"{spec.get('exchange_type')} exchange, {spec.get('tasks')} task(s), repeat {spec.get('repeat')}")
    label = spec.get("label") or meta.get("run_id", "")
    for phase, name in PLOTS.items():
        against = "bindings per queue" if phase == "route" else "queues"
        plot(levels, phase, out / name, f"{label}: {phase} cost against {against} (median, min–max over repeats)")
    notes = "".join(f"- {n}\n" for n in meta.get("notes", []))
    md = (f"# Routing scalability: {label}\n\n{what}; status **{meta.get('status')}**.\n\n"
          "create and delete are the marginal µs per queue of each level (the queues it added or removed, "
          "with their bindings): the plots use these. The cumulative columns build (or delete) the level's whole "
          "population from nothing. route is µs per message per bound queue, with publisher confirms; baseline is "
          "a mandatory publish to an exchange with no bindings (returned). Figures are medians over repeats.\n\n"
          f"{table_markdown(levels)}\n\n## Log-log slopes\n\nslope 1 = the per-queue (per-delivery) cost grows "
          "linearly with the population; a slope whose whole 95% interval is above 1 is flagged as worse than "
          f"linear.\n\n{slopes_markdown(levels)}\n\n"
          + "".join(f"![{p}]({n})\n\n" for p, n in PLOTS.items())
          + (f"## Notes\n\n{notes}" if notes else ""))
    (out / "scalability.md").write_text(md)
    body = _md_to_html(md)
    (out / "report.html").write_text(f"<!doctype html><meta charset='utf-8'><title>{html.escape(label)}</title>"
                                     "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
                                     "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
                                     "text-align:right}</style>" + body)
    return out / "scalability.md"


def _md_to_html(md: str) -> str:
    """Just enough Markdown for this report: headings, tables, images, bullets, paragraphs."""
    out: list[str] = []
    table: list[str] = []

    def flush() -> None:
        if table:
            cells = [[html.escape(c.strip()).replace("**", "") for c in r.strip().strip("|").split("|")] for r in table]
            head, body = cells[0], cells[2:]
            out.append("<table><tr>" + "".join(f"<th>{c}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in body) + "</table>")
            table.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line.startswith("!["):
            src = line[line.index("(") + 1:line.rindex(")")]
            out.append(f"<p><img src='{html.escape(src)}' alt=''></p>")
        elif line.startswith("- "):
            out.append(f"<li>{html.escape(line[2:])}</li>")
        elif line.strip():
            out.append(f"<p>{html.escape(line).replace('**', '')}</p>")
    flush()
    return "\n".join(out)
