"""leaderboard.md and a self-contained report.html (plots embedded as base64 PNG).

Takes plain rows (lists of dicts), so `rbench report` can re-render from the files a
reduce wrote without Spark. Every figure is printed next to how it was measured.
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from rbench.report import plots
from rbench.samples.conventions import STALE_MEANING, STEP_NUMBERING, shown_step

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
    ("window_s", "window s"),
]
# the Faults section: (label, column of this fault, column of the whole run or None); the method comes from
# faults.json "method" (rbench.reduce.faults.FIGURES), so a re-render says what the reduce measured
FAULT_ROWS: list[tuple[str, str, str | None]] = [
    ("step", "step", None), ("fault started (s since t0)", "at_s", None), ("action ended", "end_s", None),
    ("node back", "back_s", None), ("first confirm after the fault (s)", "first_confirm_s", None),
    ("", "first_confirm_note", None),
    ("pre-fault mean consume rate (msg/s)", "baseline_consume_rate", None), ("seconds averaged", "baseline_seconds", None),
    ("consume rate back", "consume_back", None), ("consume rate back after (s)", "consume_back_s", None),
    ("lowest consume rate after the fault (msg/s)", "consume_lowest_rate", None), ("", "recovery_note", None),
    ("lost (confirmed, never consumed)", "lost", "run_lost"),
    ("in flight at the cut (connection_lost)", "connection_lost", "run_connection_lost"),
    ("… of those consumed anyway", "connection_lost_consumed", "run_connection_lost_consumed"),
    ("duplicated", "duplicated", "run_duplicated"), ("reordered", "reordered", "run_reordered"),
    ("redelivered", "redelivered", "run_redelivered"),
    ("client reconnects", "reconnects", None), ("… not back by the end of the run", "reconnects_not_back", None),
    ("longest client reconnect (s)", "reconnect_max_s", "run_reconnect_max_s"),
    ("in flight at the cuts, as the clients reported", "in_flight_reported", None),
    ("schedule slots skipped while disconnected", "skipped", None),
    ("fault window (s since t0)", "window_start_s", None), ("… to", "window_end_s", None),
]
PHASE_HEADERS = [
    ("cluster", "cluster"), ("phase", "phase"), ("start_s", "start s"), ("duration_s", "duration s"),
    ("buildup_rate", "build-up msg/s (broker)"), ("buildup_rate_client", "build-up msg/s (client)"),
    ("peak_backlog", "peak backlog (broker)"), ("peak_backlog_client", "peak backlog (client)"),
    ("drain_s", "drain s (broker)"), ("drain_s_client", "drain s (client)"),
    ("drain_consume_rate", "consumed/s draining"), ("e2e_p50_ms", "e2e p50"), ("e2e_p99_ms", "e2e p99"),
    ("e2e_max_ms", "e2e max"),
]


def fmt(value: Any, key: str = "") -> str:
    """Human figure: rates with thousands separators, ms with 3 significant decimals."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_ms"):
        return f"{value:.3f} ms" if value < 10 else f"{value:,.1f} ms"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def cell(row: dict[str, Any], key: str) -> str:
    """One figure of a per-step row as printed: ``fmt``, except that steps count from 1 (rbench.samples.conventions)."""
    if key == "step" and row.get(key) is not None:
        return str(shown_step(row[key]))
    return fmt(row.get(key), key)


def _money(v: Any, currency: str) -> str:
    return "–" if v is None else f"{v:,.2f} {currency}"


def _who(row: dict[str, Any]) -> str:
    """The cluster's name, marked when its step was limited by the load generator (rbench.samples.generator)."""
    return f"{row['cluster']} (generator-bound: see notes)" if row.get("generator_bound") else str(row["cluster"])


def _cost(row: dict[str, Any], key: str, currency: str) -> str:
    """A cost cell: "no price" when the cluster's types are missing from the price list."""
    return "no price" if row.get("monthly_cost") is None else _money(row[key], currency)


def leaderboard_markdown(board: dict[str, Any], notes: list[str], meta: dict[str, Any]) -> str:
    """The leaderboard as Markdown, with the rule and the method of each number."""
    cur = board["prices"]["currency"]
    lines = ["# rbench leaderboard", ""]
    lines += [f"Runs: {', '.join(r['run_id'] + ' (' + r['status'] + ')' for r in meta['runs'])}", ""]
    lines += ["## Top throughput per cluster", "",
              f"Achieved consume rate of the cluster's best step. {meta['rate_method']}.", "",
              "| rank | cluster | step | target msg/s | consumed msg/s | e2e p99 | matched | broker CPU µs/msg | broker mem peak MiB |",
              "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(board["top_throughput"], 1):
        lines.append(f"| {i} | {_who(r)} | {cell(r, 'step')} | {fmt(r['target_rate'])} | {fmt(r['consume_rate'])} | "
                     f"{fmt(r['e2e_p99_ms'], '_ms')} | {fmt(r['matched'])} | {fmt(r.get('broker_cpu_us_per_msg'))} | "
                     f"{fmt(r.get('broker_mem_peak_mb'))} |")
    lines += ["", "## Highest matched target per cluster", "", f"Rule: {meta['match_rule']} (p99 exact, from intended send time).", "",
              "| rank | cluster | step | target msg/s | consumed msg/s | e2e p99 | broker CPU µs/msg | broker mem peak MiB |",
              "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(board["highest_matched"], 1):
        lines.append(f"| {i} | {_who(r)} | {cell(r, 'step')} | {fmt(r['target_rate'])} | {fmt(r['consume_rate'])} | "
                     f"{fmt(r['e2e_p99_ms'], '_ms')} | {fmt(r.get('broker_cpu_us_per_msg'))} | {fmt(r.get('broker_mem_peak_mb'))} |")
    matched = {r["cluster"] for r in board["highest_matched"]}
    missing = sorted({c["cluster"] for c in board["costs"]} - matched)
    if missing:
        lines += ["", f"Matched no step: {', '.join(missing)}."]
    lines += ["", "## Cost per 1000 msg/s per month at top throughput", "",
              f"monthly cost = nodes × (instance hourly × {board['prices']['hours_per_month']:g} h + volume GB × GB-month "
              f"+ billed IOPS × IOPS-month); ÷ (top consume rate / 1000). Prices: {board['prices']['path']} "
              f"({board['prices']['source']}).", "",
              "| rank | cluster | nodes × instance | monthly cost | top consumed msg/s | cost per 1000 msg/s/month |",
              "|---|---|---|---|---|---|"]
    for i, r in enumerate(board["cost_at_top"], 1):
        lines.append(f"| {i} | {r['cluster']} | {r['nodes']} × {r['instance_type']} | {_cost(r, 'monthly_cost', cur)} | "
                     f"{fmt(r['consume_rate'])} | {_cost(r, 'cost_per_1k_rate', cur)} |")
    t = board.get("target_rate")
    lines += ["", f"## Cost per 1000 msg/s per month at target {fmt(t)} msg/s", ""]
    if t is None:
        lines.append("No cluster matched any target; no cost at a target rate.")
    else:
        lines += [f"Target chosen by: {board['target_rate_chosen_by']}. Clusters that matched a target ≥ {fmt(t)} msg/s; "
                  f"monthly cost ÷ (target / 1000).", "",
                  "| rank | cluster | nodes × instance | monthly cost | highest matched target | cost per 1000 msg/s/month |",
                  "|---|---|---|---|---|---|"]
        for i, r in enumerate(board["cost_at_target"], 1):
            lines.append(f"| {i} | {r['cluster']} | {r['nodes']} × {r['instance_type']} | {_cost(r, 'monthly_cost', cur)} | "
                         f"{fmt(r['highest_matched_target'])} | {_cost(r, 'cost_per_1k_rate', cur)} |")
        if not board["cost_at_target"]:
            lines.append("(no cluster matched this target)")
    if notes:
        lines += ["", "## Notes (what is missing or was skipped)", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.6em} h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:12px;margin:8px 0} th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3;position:sticky;top:0} td:nth-child(-n+2){text-align:left}
.method{color:#555;font-size:13px} .notes li{color:#8a4b00} img{max-width:100%;border:1px solid #eee;margin:6px 0}
.scroll{overflow-x:auto}
"""


def _fault_cell(row: dict[str, Any], key: str | None) -> str:
    """A figure of a fault as printed: instants and durations in s to the ms (a first confirm is often
    well under 0.1 s), steps from 1, the rest like every other figure."""
    if key is None:
        return ""
    value = row.get(key)
    if key.endswith("_s") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,.3f}"
    return cell(row, key)


def faults_html(doc: dict[str, Any], image: Path | None) -> str:
    """The Faults section: the rules, one table per fault (figure, this fault, whole run, how it is measured)
    and the plot of the rates around each fault."""
    method = doc.get("method") or {}
    parts = ["<h2>Faults</h2><p class='method'>" + html.escape(str(method.get("rules", ""))) + ". Rates around each "
             "fault: " + html.escape(str(method.get("series", ""))) + ". Same figures: faults.csv / faults.json.</p>"]
    for f in doc.get("faults") or []:
        title = (f"Fault {int(f['index']) + 1}: {f['action']} {f['node']} on cluster {f['cluster']} "
                 f"at {_fault_cell(f, 'at_s')} s ({f['run_id']})" + ("" if f.get("ok", True) else f" — FAILED: {f.get('error')}"))
        rows = []
        for label, key, run_key in FAULT_ROWS:
            value = f.get(key)
            if label == "" and value is None:
                continue                       # a note only when a figure above it is empty
            rows.append([label or "why", _fault_cell(f, key), _fault_cell(f, run_key), str(method.get(key, ""))])
        parts.append(f"<h3>{html.escape(title)}</h3>" + _table(["figure", "this fault", "whole run", "how it is measured"], rows))
    if image is not None:
        parts.append(_img(image, "publish, confirm and consume rates around each fault"))
    return "\n".join(parts)


def report_html(steps: list[dict[str, Any]], board: dict[str, Any], notes: list[str], meta: dict[str, Any],
                images: dict[str, Path], phases: list[dict[str, Any]] | None = None,
                faults: dict[str, Any] | None = None) -> str:
    """The whole report as one HTML string (images inline)."""
    md = leaderboard_markdown(board, [], meta)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>rbench report</title><style>{CSS}</style></head><body>",
             "<h1>rbench capacity report</h1>"]
    run_rows = [[r["run_id"], str(r["status"]), str(r["workload_name"]), str(r["workload_hash"]), f"{r['warmup_s']:g} s",
                 str(r["driver"]), str(r["started_at"]), str(r["ended_at"])] for r in meta["runs"]]
    parts.append(_table(["run", "status", "workload", "workload_hash", "warm-up excluded per step", "driver", "started", "ended"], run_rows))
    if notes:
        parts.append("<h2>What is missing or was skipped</h2><ul class='notes'>"
                     + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    parts.append("<h2>How each number is measured</h2><ul class='method'>")
    for item in [meta["rate_method"], meta["measured_set"], "percentiles: " + meta["percentile_method"],
                 *[f"{k}: {v}" for k, v in meta["latencies"].items()], meta["match_rule"],
                 "lost: measured published message with outcome ack, unconfirmed or connection_lost never received by any "
                 "consumer in the run",
                 "duplicated: measured message (same producer + seq) received more than once; reordered: delivery whose seq is "
                 "lower than one already received from the same producer on the same queue (receive order t_received, ties by seq)",
                 "nacked / returned / confirm timeout / unconfirmed / connection lost: measured published messages by "
                 "outcome (connection lost: published, and the connection died before its confirm came; not sent again)",
                 "timeline: " + meta["timeline_method"], meta.get("stale_method", STALE_MEANING),
                 meta.get("step_numbering", STEP_NUMBERING), f"clock: {meta['runs'][0].get('clock')}"]:
        parts.append(f"<li>{html.escape(str(item))}</li>")
    parts.append("</ul>")
    parts.append("<h2>Leaderboards</h2>")
    parts.append(_md_tables_to_html(md))
    parts.append("<h2>Throughput per step</h2>" + _img(images["throughput"], "achieved vs target throughput"))
    parts.append("<h2>Latency per step</h2>" + _img(images["latency"], "end-to-end latency per step"))
    parts.append(_img(images["confirm"], "confirm latency per step"))
    parts.append("<h2>Within the run</h2>" + _img(images["timeline"], "throughput and latency over time"))
    if faults and faults.get("faults"):
        parts.append(faults_html(faults, images.get("faults")))
    if "broker" in images:
        parts.append("<h2>The broker's side</h2><p class='method'>" + html.escape(str(meta.get("broker_method", "")))
                     + "</p>" + _img(images["broker"], "queue depth, broker memory and CPU over time"))
    if phases:
        parts.append("<h2>Backlog phases</h2><p class='method'>Per consumer.pause phase (docs/broker.md): build-up rate and "
                     "peak backlog from the broker's depth samples and from client counts (copies expected − received); "
                     "drain time from resuming until the depth is at most drained_below; e2e latency of the messages sent "
                     "in the phase. Same table: phases.csv.</p>")
        parts.append(_table([h for _, h in PHASE_HEADERS], [[fmt(p.get(k), k) for k, _ in PHASE_HEADERS] for p in phases]))
    parts.append("<h2>All steps</h2><p class='method'>Latencies in ms, exact; rates in msg/s over the measurement window; "
                 "counts over measured messages. Same table: steps.csv / steps.parquet.</p><div class='scroll'>")
    parts.append(steps_table_html(steps))
    parts.append("</div></body></html>")
    return "\n".join(parts)


def steps_table_html(steps: list[dict[str, Any]]) -> str:
    """The "All steps" table: every column of STEP_COLUMNS, steps counted from 1."""
    return _table([h for _, h in STEP_COLUMNS], [[cell(s, k) for k, _ in STEP_COLUMNS] for s in steps])


def _md_tables_to_html(md: str) -> str:
    """Render the leaderboard Markdown (headings, paragraphs, pipe tables) as HTML."""
    out: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if rows:
            out.append(_table(rows[0], rows[2:]))
            rows.clear()

    for line in md.splitlines()[1:]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
            continue
        flush()
        if line.startswith("## "):
            out.append(f"<h3>{html.escape(line[3:])}</h3>")
        elif line.strip():
            out.append(f"<p class='method'>{html.escape(line)}</p>")
    flush()
    return "\n".join(out)


def render_report(out_dir: Path, steps: list[dict[str, Any]], timeline: list[dict[str, Any]], board: dict[str, Any],
                  notes: list[str], meta: dict[str, Any], broker: list[dict[str, Any]] | None = None,
                  phases: list[dict[str, Any]] | None = None, faults: dict[str, Any] | None = None) -> Path:
    """Write leaderboard.md, the PNGs and report.html into ``out_dir``; return the HTML path. ``faults``:
    the reduce's faults.json document (None or no rows: no Faults section, nothing shaded)."""
    out_dir = Path(out_dir)
    fault_rows = list((faults or {}).get("faults") or [])
    (out_dir / "leaderboard.md").write_text(leaderboard_markdown(board, notes, meta))
    images = {
        "throughput": plots.throughput_plot(steps, out_dir / "throughput.png"),
        "latency": plots.latency_plot(steps, out_dir / "latency.png", "e2e"),
        "confirm": plots.latency_plot(steps, out_dir / "confirm_latency.png", "confirm"),
        "timeline": plots.timeline_plot(timeline, steps, out_dir / "timeline.png", faults=fault_rows),
    }
    if fault_rows:
        images["faults"] = plots.fault_plot(fault_rows, out_dir / "faults.png")
    if broker:
        from rbench.report.broker_plots import broker_plot
        images["broker"] = broker_plot(timeline, broker, phases or [], out_dir / "broker.png", faults=fault_rows)
    path = out_dir / "report.html"
    path.write_text(report_html(steps, board, notes, meta, images, phases, faults))
    return path


def rerender(out_dir: Path) -> Path:
    """Re-render from steps.parquet, timeline.parquet and leaderboard.json (no Spark)."""
    import pyarrow.parquet as pq

    out_dir = Path(out_dir)
    saved = json.loads((out_dir / "leaderboard.json").read_text())
    steps = pq.read_table(out_dir / "steps.parquet").to_pylist()
    tl = pq.read_table(out_dir / "timeline.parquet").to_pylist()
    broker_path = out_dir / "broker_timeline.parquet"
    broker = pq.read_table(broker_path).to_pylist() if broker_path.is_file() else []
    faults_path = out_dir / "faults.json"
    faults = json.loads(faults_path.read_text()) if faults_path.is_file() else None
    return render_report(out_dir, steps, tl, saved["leaderboard"], saved["notes"], saved["meta"], broker=broker,
                         phases=saved.get("phases", []), faults=faults)
