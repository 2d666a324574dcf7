"""The seeds' studies' tables and bar charts (docs/studies/), from the runs `make study-004` / `make study-000` made.

    python scripts/study_tables.py seed-004 --compare classic=DIR --compare quorum=DIR --run perftest=RUN_DIR … \
        --md docs/studies/seed-004-results.md --png docs/studies/seed-004.png
    python scripts/study_tables.py seed-000 --sweep rabbitmq-3.10=DIR --sweep rabbitmq-4.0=DIR \
        --sweep rabbitmq-4.0-khepri=DIR --pair rabbitmq-3.10:rabbitmq-4.0 --pair rabbitmq-4.0:rabbitmq-4.0-khepri \
        --md docs/studies/seed-000-results.md --png docs/studies/seed-000.png

Seed 004's figures come from `rbench compare`'s compare.json (per round A and B, the ratio B/A and its 95 % t
interval over the paired rounds: docs/compare.md) and, for the PerfTest runs, each run's steps.csv. Seed 000's
come from the sweeps' scalability.parquet (rbench.scenarios.scalability.output): per phase the median µs per
operation over the levels, the pooled log-log slope with its 95 % interval, and between two sweeps the ratio
B/A paired by level (the same queue and binding counts) with rbench.compare.stats's t interval over levels.
A script, not part of the package: it only reads files rbench wrote and draws with the report's plot style.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from rbench.compare.stats import paired_ratio
from rbench.report.plot_style import plt, series_colors
from rbench.scenarios.scalability.output import load, pooled_slope, summary

# The seed's published figures (issue 28; RabbitMQ's "Ten Benefits of AMQP 1.0 Flow Control", 8 cores, clients
# on the same box): end-to-end msg/s.
SEED_004 = {"classic 1.0, 3.13 plugin": 21_790, "classic 1.0, 4.0 native": 99_413, "classic 0.9.1, 4.0 PerfTest": 88_534,
            "quorum 1.0, 4.0 default": 9_983, "quorum 1.0, 4.0 tuned": 83_181}


def _labelled(values: list[str], what: str) -> dict[str, Path]:
    out = {}
    for v in values:
        label, sep, path = v.partition("=")
        if not sep:
            sys.exit(f"study_tables: --{what} {v!r}: expected LABEL=DIR")
        out[label] = Path(path)
    return out


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _rate(v: float) -> str:
    return f"{v:,.0f}"


# ---- seed 004 ------------------------------------------------------------------------------------------
def _steps_row(run_dir: Path) -> dict[str, Any]:
    found = sorted(run_dir.glob("**/steps.csv"))
    if not found:
        sys.exit(f"study_tables: {run_dir}: no steps.csv (was the run reduced?)")
    with found[0].open() as f:
        return next(csv.DictReader(f))


SIDE_COLUMNS = ("consumed_in_window", "window_s", "publish_rate", "consume_rate", "e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms")


def _side_row(label: str, seed: str | None, rows: list[dict[str, Any]]) -> tuple[str, float]:
    """One line of the seed-style table: means over the runs of one side; (the line, its consume rate)."""
    mean = {c: statistics.fmean(float(r[c]) for r in rows if r.get(c) not in (None, "")) for c in SIDE_COLUMNS}
    theirs = "–" if seed is None else _rate(SEED_004[seed])
    return (f"| {label} | {len(rows)} | {mean['consumed_in_window']:,.0f} | {mean['window_s']:.1f} | {_rate(mean['publish_rate'])} | "
            f"{_rate(mean['consume_rate'])} | {mean['e2e_p50_ms']:.1f} | {mean['e2e_p99_ms']:.1f} | "
            f"{mean['e2e_p999_ms']:.1f} | {theirs} |", mean["consume_rate"])


def seed_004(args: argparse.Namespace) -> None:
    compares = {label: json.loads((folder / "compare.json").read_text())
                for label, folder in _labelled(args.compare, "compare").items()}
    seed_names = dict(s.split("=", 1) for s in args.seed or [])        # side label → SEED_004 key
    table = ["| side | runs | messages measured | window s | sender msg/s | receiver (end-to-end) msg/s | e2e p50 ms | "
             "e2e p99 ms | e2e p99.9 ms | seed's end-to-end msg/s (8 cores) |", "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    bars: dict[str, float] = {}
    for c in compares.values():
        for cluster in (c["a"], c["b"]):
            rows = [_steps_row(Path(r["run_dir"])) for rnd in c["rounds"] for r in rnd["runs"] if r["cluster"] == cluster]
            line, rate = _side_row(cluster, seed_names.get(cluster), rows)
            table.append(line)
            bars[cluster] = rate
    sides: dict[str, list[Path]] = {}
    for label, run_dir in _labelled(args.run or [], "run").items():
        sides.setdefault(label.split("#")[0], []).append(run_dir)
    for label, dirs in sides.items():
        line, rate = _side_row(label, seed_names.get(label), [_steps_row(d) for d in dirs])
        table.append(line)
        bars[label] = rate
    ratios = ["| comparison | metric | A | B | B/A | 95 % CI | verdict | rounds |", "|---|---|--:|--:|--:|---|---|--:|"]
    for label, c in compares.items():
        for key in ("consume_rate", "publish_rate", "e2e_p50_ms", "e2e_p99_ms", "broker_cpu_us_per_msg",
                    "client_cpu_us_per_msg"):
            m = c["metrics"].get(key)
            if m is None:
                continue
            ci = "–" if not m.get("ci") else f"{m['ci'][0]:.3f}–{m['ci'][1]:.3f}"
            ratio = "–" if m.get("ratio") is None else f"{m['ratio']:.3f}"
            ratios.append(f"| {label}: {c['b']} / {c['a']} | {key} | {_fmt([x for x in m['a'] if x])} | "
                          f"{_fmt([x for x in m['b'] if x])} | {ratio} | {ci} | {m['verdict'].split(' (')[0]} | "
                          f"{len(m['a'])} |")
    text = "\n".join(table) + "\n\n" + "\n".join(ratios) + "\n"
    Path(args.md).write_text(text)
    print(text)
    theirs = {seed_names.get(k, k): SEED_004[seed_names[k]] for k in bars if k in seed_names}
    _bar_chart(bars, theirs, args.png,       # in the same order: the same colour is the same side in both panels
               "end-to-end msg/s", "seed 004: AMQP 1.0 and 0.9.1 on RabbitMQ 3.x and 4.0 (receiver rate)")


def _fmt(xs: list[float]) -> str:
    return "–" if not xs else (_rate(_geomean(xs)) if _geomean(xs) >= 100 else f"{_geomean(xs):.2f}")


def _bar_chart(ours: dict[str, float], theirs: dict[str, float], png: str, ylabel: str, title: str) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    for ax, figures, sub in ((axes[0], theirs, "the seed (8 cores, published)"),
                             (axes[1], ours, "this machine (2 shared cores, clients on it)")):
        names = list(figures)
        colors = series_colors(names)
        ax.bar(range(len(names)), [figures[n] for n in names], color=[colors[n] for n in names])
        for i, n in enumerate(names):
            ax.annotate(_rate(figures[n]), (i, figures[n]), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(sub, fontsize=10)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    print(f"wrote {png}")


# ---- seed 000 ------------------------------------------------------------------------------------------
PHASES = ("create", "delete", "route")
UNITS = {"create": "µs per queue (with its bindings)", "delete": "µs per queue (with its bindings)",
         "route": "µs per message per bound queue"}


def seed_000(args: argparse.Namespace) -> None:
    sweeps = {label: summary(load(d)[0]) for label, d in _labelled(args.sweep, "sweep").items()}
    lines = ["| sweep | levels | " + " | ".join(f"{p} median µs | {p} slope [95 % CI]" for p in PHASES) + " |",
             "|---|--:|" + "--:|---|" * len(PHASES)]
    medians: dict[str, dict[str, float]] = {}
    for label, levels in sweeps.items():
        cells = []
        for p in PHASES:
            vals = [lv[p] for lv in levels if math.isfinite(lv[p])]
            medians.setdefault(p, {})[label] = statistics.median(vals)
            s = pooled_slope(p, levels)
            cells.append(f"{statistics.median(vals):,.0f} | {s.text()}")
        lines.append(f"| {label} | {len(levels)} | " + " | ".join(cells) + " |")
    lines += ["", "| B / A | phase | levels paired | B/A (geometric mean over levels) | 95 % CI | shown? |",
              "|---|---|--:|--:|---|---|"]
    for pair in args.pair or []:
        a_name, _, b_name = pair.partition(":")
        a_lv = {(lv["queues"], lv["bindings"]): lv for lv in sweeps[a_name]}
        b_lv = {(lv["queues"], lv["bindings"]): lv for lv in sweeps[b_name]}
        shared = sorted(set(a_lv) & set(b_lv))
        for p in PHASES:
            pts = [(a_lv[k][p], b_lv[k][p]) for k in shared if a_lv[k][p] > 0 and b_lv[k][p] > 0]
            est = paired_ratio([x for x, _ in pts], [y for _, y in pts])
            shown = "yes" if est.shows_difference else "no difference shown"
            lines.append(f"| {b_name} / {a_name} | {p} | {len(pts)} | {est.ratio:.2f} | "
                         f"{est.lo:.2f}–{est.hi:.2f} | {shown} |")
    text = "\n".join(lines) + "\n"
    Path(args.md).write_text(text)
    print(text)
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
    names = list(sweeps)
    colors = series_colors(names)
    for ax, p in zip(axes, PHASES):
        vals = [medians[p][n] for n in names]
        ax.bar(range(len(names)), vals, color=[colors[n] for n in names])
        for i, v in enumerate(vals):
            ax.annotate(f"{v:,.0f}", (i, v), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
        ax.set_title(f"{p}: median over levels", fontsize=10)
        ax.set_ylabel(UNITS[p], fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("seed 000: routing scalability sweep (this machine, 2 shared cores)")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    plt.close(fig)
    print(f"wrote {args.png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="study", required=True)
    p4 = sub.add_parser("seed-004")
    p4.add_argument("--compare", action="append", required=True, help="LABEL=compare folder")
    p4.add_argument("--run", action="append", help="LABEL=run directory (LABEL#2 … for repeats)")
    p4.add_argument("--seed", action="append", help="SIDE=seed figure name: which published figure a side is")
    p0 = sub.add_parser("seed-000")
    p0.add_argument("--sweep", action="append", required=True, help="LABEL=scalability run directory")
    p0.add_argument("--pair", action="append", help="A:B, two sweep labels")
    for p in (p4, p0):
        p.add_argument("--md", required=True)
        p.add_argument("--png", required=True)
    args = parser.parse_args()
    (seed_004 if args.study == "seed-004" else seed_000)(args)


if __name__ == "__main__":
    main()
