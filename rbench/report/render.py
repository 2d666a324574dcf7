"""leaderboard.md and a self-contained report.html (plots embedded as base64 PNG).

Takes plain rows (lists of dicts), so `rbench report` can re-render from the files a
reduce wrote without Spark. Every figure is printed next to how it was measured.
"""
from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rbench.report.draw import draw_all
from rbench.report.fault_plots import fault_plot
from rbench.report.figures import cell, fmt
from rbench.report.html_parts import CSS, img, md_tables_to_html, table
from rbench.report.leaderboard_md import leaderboard_markdown
from rbench.report.search_plots import probes_plot
from rbench.report.sections import faults_html, methodology_html, search_html, verdict_html
from rbench.report.step_plots import knee_plot, latency_plot, throughput_plot
from rbench.report.timeline_plots import timeline_plot

STEP_COLUMNS = [
    ("run_id", "run"), ("cluster", "cluster"), ("step", "step"), ("target_rate", "target msg/s"),
    ("publish_rate", "published/s"), ("confirm_rate", "confirmed/s"), ("consume_rate", "consumed/s"),
    ("matched", "matched"), ("e2e_p50_ms", "e2e p50"), ("e2e_p75_ms", "e2e p75"), ("e2e_p95_ms", "e2e p95"),
    ("e2e_p99_ms", "e2e p99"), ("e2e_p999_ms", "e2e p99.9"), ("e2e_max_ms", "e2e max"),
    ("e2e_sent_p50_ms", "sent→recv p50"), ("e2e_sent_p99_ms", "sent→recv p99"), ("e2e_sent_max_ms", "sent→recv max"),
    ("confirm_p50_ms", "confirm p50"), ("confirm_p99_ms", "confirm p99"), ("confirm_p999_ms", "confirm p99.9"),
    ("confirm_max_ms", "confirm max"), ("send_lag_p50_ms", "send lateness p50"), ("send_lag_p99_ms", "send lateness p99"),
    ("generator_bound", "generator-bound"), ("gen_cpu_max", "task CPU (max, cores)"), ("gen_loop_lag_p99_ms", "task loop lag p99"),
    ("gen_window_full_min", "window full (min share)"), ("published", "measured published"), ("deliveries", "measured deliveries"),
    ("nacked", "nacked"), ("returned", "returned"), ("timeout", "confirm timeout"), ("unconfirmed", "unconfirmed"),
    ("connection_lost", "connection lost"),
    ("lost", "lost"), ("duplicated", "duplicated"), ("reordered", "reordered"), ("redelivered", "redelivered"),
    ("broker_cpu_us_per_msg", "broker CPU µs/msg"), ("broker_mem_peak_mb", "broker mem peak MiB"),
    ("broker_unroutable_dropped", "broker unroutable dropped (≤)"),
    ("connections_opened", "connections opened"), ("idle_connections", "idle connections"),
    ("connect_p50_ms", "connect p50"), ("connect_p99_ms", "connect p99"), ("connect_max_ms", "connect max"),
    ("connect_refused", "connect refused"), ("connect_timed_out", "connect timed out"),
    ("broker_mem_per_connection_kib", "broker KiB per idle connection"),
    ("broker_conn_mem_per_connection_kib", "connection processes KiB per idle connection"),
    ("churn_target_per_s", "churn asked /s"), ("churn_per_s", "churn /s"), ("churned", "churned"),
    ("churn_failed", "churn failed"), ("churn_connect_p99_ms", "churn connect p99"),
    ("churn_baseline_step", "churn baseline step"), ("broker_cpu_ms_per_churn", "broker CPU ms per churned connection"),
    ("churn_e2e_p99_ratio", "e2e p99 ÷ baseline"),
    ("window_s", "window s"), ("broker", "broker"),
]
PHASE_HEADERS = [
    ("cluster", "cluster"), ("phase", "phase"), ("start_s", "start s"), ("duration_s", "duration s"),
    ("buildup_rate", "build-up msg/s (broker)"), ("buildup_rate_client", "build-up msg/s (client)"),
    ("peak_backlog", "peak backlog (broker)"), ("peak_backlog_client", "peak backlog (client)"),
    ("drain_s", "drain s (broker)"), ("drain_s_client", "drain s (client)"),
    ("drain_consume_rate", "consumed/s draining"), ("e2e_p50_ms", "e2e p50"), ("e2e_p99_ms", "e2e p99"),
    ("e2e_max_ms", "e2e max"),
]


def report_html(steps: list[dict[str, Any]], board: dict[str, Any], notes: list[str], meta: dict[str, Any],
                images: dict[str, Path], phases: list[dict[str, Any]] | None = None,
                search: dict[str, Any] | None = None, faults: dict[str, Any] | None = None) -> str:
    """The whole report as one HTML string (images inline): the answer first, the method last."""
    names = sorted({str(r.get("workload_name")) for r in meta["runs"]})
    runs = meta["runs"]
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>rbench report: {html.escape(', '.join(names))}"
             f"</title><style>{CSS}</style></head><body>",
             "<h1>rbench capacity report</h1>",
             f"<p class='sub'>workload {html.escape(', '.join(names))} · "
             + (f"rate search, {len(runs)} probes" if search else f"{len(runs)} run(s)")
             + f" · {len({s['cluster'] for s in steps})} cluster(s) · {len(steps)} step(s) · "
             + "".join(f"{html.escape(v)} · " for v in sorted({v for r in runs for v in (r.get("broker_versions") or {}).values()}))
             + f"{html.escape(str(runs[0].get('started_at')))} → {html.escape(str(runs[-1].get('ended_at')))}</p>"]
    parts.append(verdict_html(board, notes))
    if search:
        parts.append(search_html(search, images))
    parts.append("<h2>Capacity curves</h2><p class='method'>x = the target rate (msg/s) of each step; filled markers met "
                 "the SLO. The knee plot puts latency against what was really delivered: where p99 turns up, queueing "
                 "starts to set the latency.</p><div class='plots'>")
    parts.append(img(images["throughput"], "achieved vs target throughput") + img(images["knee"], "latency against achieved throughput"))
    parts.append("</div>")
    parts.append(img(images["latency"], "end-to-end latency per target rate"))
    parts.append(img(images["confirm"], "confirm latency per target rate"))
    parts.append("<h2>Within the run</h2>" + img(images["timeline"], "throughput and latency over time"))
    if faults and faults.get("faults"):
        parts.append(faults_html(faults, images.get("faults")))
    if "broker" in images:
        parts.append("<h2>The broker's side</h2><p class='method'>" + html.escape(str(meta.get("broker_method", "")))
                     + "</p>" + img(images["broker"], "queue depth, broker memory and CPU over time"))
    md = leaderboard_markdown({k: v for k, v in board.items() if k != "verdicts"}, [], meta)
    parts.append("<h2>Leaderboards</h2>")
    parts.append(md_tables_to_html(md))
    if phases:
        parts.append("<h2>Backlog phases</h2><p class='method'>Per consumer.pause phase (docs/broker.md): build-up rate and "
                     "peak backlog from the broker's depth samples and from client counts (copies expected − received); "
                     "drain time from resuming until the depth is at most drained_below; e2e latency of the messages sent "
                     "in the phase. Same table: phases.csv.</p>")
        parts.append(table([h for _, h in PHASE_HEADERS], [[fmt(p.get(k), k) for k, _ in PHASE_HEADERS] for p in phases]))
    parts.append("<h2>All steps</h2><p class='method'>Latencies in ms, exact; rates in msg/s over the step's measurement "
                 "window (the step less its warm-up, the producers' start delays and, with a message count, the tail after "
                 "the first producer finished: 'window s'); counts over measured messages (those due inside that window), "
                 "not over the whole run: the run's own totals are in run.json's task_results. "
                 "Same table: steps.csv / steps.parquet.</p><div class='scroll'>")
    parts.append(steps_table_html(steps))
    parts.append("</div>")
    if notes:
        parts.append("<h2 id='notes'>What is missing or was skipped</h2><ul class='notes'>"
                     + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    run_rows = [[r["run_id"], str(r["status"]), str(r["workload_name"]), str(r["workload_hash"]), f"{r['warmup_s']:g} s",
                 str(r["driver"]), brokers_cell(r), str(r["started_at"]), str(r["ended_at"])] for r in runs]
    parts.append("<h2>Runs</h2>" + table(["run", "status", "workload", "workload_hash", "warm-up excluded per step",
                                            "driver", "broker (read before the run)", "started", "ended"], run_rows,
                                           text_columns=(6,)))
    parts.append(methodology_html(notes, meta))
    parts.append("</body></html>")
    return "\n".join(parts)


def brokers_cell(run: dict[str, Any]) -> str:
    """A run's brokers, one per cluster ("local: RabbitMQ 4.0.5 (Erlang 27.3.4.1), …"); "–" when not recorded."""
    brokers = run.get("brokers") or {}
    return "; ".join(f"{c}: {line}" for c, line in brokers.items()) or "–"


def steps_table_html(steps: list[dict[str, Any]]) -> str:
    """The "All steps" table: every column of STEP_COLUMNS, steps counted from 1."""
    return table([h for _, h in STEP_COLUMNS], [[cell(s, k) for k, _ in STEP_COLUMNS] for s in steps])


def render_report(out_dir: Path, steps: list[dict[str, Any]], timeline: list[dict[str, Any]], board: dict[str, Any],
                  notes: list[str], meta: dict[str, Any], broker: list[dict[str, Any]] | None = None,
                  phases: list[dict[str, Any]] | None = None, search: dict[str, Any] | None = None,
                  faults: dict[str, Any] | None = None) -> Path:
    """Write leaderboard.md, the PNGs and report.html into ``out_dir``; return the HTML path. ``search``: the rate
    search's search.json (its probes drawn); ``faults``: the reduce's faults.json document (None or no rows: no
    Faults section, nothing shaded)."""
    out_dir = Path(out_dir)
    fault_rows = list((faults or {}).get("faults") or [])
    (out_dir / "leaderboard.md").write_text(leaderboard_markdown(board, notes, meta))
    probing = search is not None
    slo_ms = board.get("latency_limit_ms")
    jobs: dict[str, Callable[[], Path]] = {
        "throughput": lambda: throughput_plot(steps, out_dir / "throughput.png", probing),
        "knee": lambda: knee_plot(steps, out_dir / "latency_vs_throughput.png", probing, slo_ms),
        "latency": lambda: latency_plot(steps, out_dir / "latency.png", "e2e", probing, slo_ms),
        "confirm": lambda: latency_plot(steps, out_dir / "confirm_latency.png", "confirm", probing),
        "timeline": lambda: timeline_plot(timeline, steps, out_dir / "timeline.png", probing, faults=fault_rows),
    }
    if search is not None:
        jobs["probes"] = lambda: probes_plot(search, out_dir / "probes.png")
    if fault_rows:
        jobs["faults"] = lambda: fault_plot(fault_rows, out_dir / "faults.png")
    if broker:
        from rbench.report.broker_plots import broker_plot
        jobs["broker"] = lambda: broker_plot(timeline, broker, phases or [], out_dir / "broker.png", steps, probing,
                                             faults=fault_rows)
    images = draw_all(jobs)
    path = out_dir / "report.html"
    path.write_text(report_html(steps, board, notes, meta, images, phases, search, faults))
    return path


def rerender(out_dir: Path) -> Path:
    """Re-render from steps.parquet, timeline.parquet and leaderboard.json (no Spark).

    A leaderboard.json written before ranks and verdicts existed gets them here, from its steps."""
    import pyarrow.parquet as pq

    from rbench.reduce.leaderboard import complete

    out_dir = Path(out_dir)
    saved = json.loads((out_dir / "leaderboard.json").read_text())
    steps = pq.read_table(out_dir / "steps.parquet").to_pylist()
    tl = pq.read_table(out_dir / "timeline.parquet").to_pylist()
    broker_path = out_dir / "broker_timeline.parquet"
    broker = pq.read_table(broker_path).to_pylist() if broker_path.is_file() else []
    faults_path = out_dir / "faults.json"
    faults = json.loads(faults_path.read_text()) if faults_path.is_file() else None
    search = saved.get("search")
    return render_report(out_dir, steps, tl, complete(saved["leaderboard"], steps, search), saved["notes"], saved["meta"],
                         broker=broker, phases=saved.get("phases", []), search=search, faults=faults)
