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

from rbench.reduce import verdict
from rbench.reduce.costs import is_priced
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
    """A cost cell: "no price" when the cluster's types are missing from the price list or priced 0."""
    return "no price" if not is_priced(row.get("monthly_cost")) else _money(row[key], currency)


def rank_cell(row: dict[str, Any], place: int) -> str:
    """A rank as printed: "2", "2 (tie)" when another row has the same figure, "–" without a figure.
    Rows of a leaderboard.json older than the ranks fall back to their place in the list."""
    if "rank" not in row:
        return str(place)
    if row["rank"] is None:
        return "–"
    return f"{row['rank']} (tie)" if row.get("tie") else str(row["rank"])


def slo_text(board: dict[str, Any]) -> str:
    """The rule every verdict is judged by, in words."""
    return (f"consumed ≥ {1 - board['tolerance']:.0%} of the target rate and end-to-end p99 (from intended send time, "
            f"exact) ≤ {board['latency_limit_ms']:,.0f} ms")


def within_cell(v: dict[str, Any]) -> str:
    """The verdict table's answer: the highest rate within the SLO, marked when it is only a lower bound."""
    hi = v.get("highest_met")
    if hi is None:
        return "none"
    if v["status"] == verdict.NOT_REACHED:
        return f"≥ {verdict.rate_text(hi)} (capacity not reached)"
    if v["status"] == verdict.GENERATOR:
        return f"≥ {verdict.rate_text(hi)} (generator-limited above)"
    return verdict.rate_text(hi)


def failed_cell(v: dict[str, Any]) -> str:
    if v.get("first_failed") is None and v["status"] == verdict.GENERATOR:
        return f"none by the cluster: {v.get('failed_why')}"
    if v.get("first_failed") is None:
        return "none" if v.get("highest_met") is None else f"none up to {verdict.rate_text(v['highest_met'])}"
    return f"{verdict.rate_text(v['first_failed'])}: {v.get('failed_why') or 'failed'}"


def cost_cell(v: dict[str, Any], currency: str) -> str:
    """Cost per 1000 msg/s per month at the highest rate within the SLO; "≤" when that rate is a lower bound."""
    if not is_priced(v.get("monthly_cost")):
        return "no price"
    if v.get("cost_per_1k_rate") is None:
        return "–"
    return ("≤ " if v.get("cost_is_upper_bound") else "") + _money(v["cost_per_1k_rate"], currency)


def generator_cell(v: dict[str, Any]) -> str:
    flagged = v.get("generator_steps") or []
    if not flagged:
        return "fine" if v.get("generator_checked", True) else "not measured"
    return "generator-bound at " + ", ".join(verdict.rate_text(g.get("target_rate")) for g in flagged)


VERDICT_HEADERS = ["rank", "cluster", "nodes × instance, volume", "highest rate within the SLO", "e2e p99 there",
                   "first that failed", "cost per 1000 msg/s per month", "generator", "verdict"]


def verdict_rows(board: dict[str, Any]) -> list[list[str]]:
    """The verdict table's cells, one row per cluster in rank order."""
    cur = board["prices"]["currency"]
    return [[rank_cell(v, i), str(v["cluster"]), f"{v.get('nodes')} × {v.get('instance_type')}, {v.get('volume_type')}",
             within_cell(v), fmt(v.get("met_e2e_p99_ms"), "_ms"), failed_cell(v), cost_cell(v, cur), generator_cell(v),
             str(v.get("verdict"))] for i, v in enumerate(board.get("verdicts") or [], 1)]


def headline(board: dict[str, Any]) -> list[str]:
    """The answer in two sentences: who carries the most within the SLO, who is cheapest per 1000 msg/s."""
    vs = board.get("verdicts") or []
    met = [v for v in vs if v.get("highest_met") is not None]
    if not vs:
        return []
    if not met:
        return ["No cluster met the SLO at any rate tried."]
    cur = board["prices"]["currency"]
    if len(vs) == 1:
        v = vs[0]
        figure = verdict.rate_text(v["highest_met"])
        bound = {verdict.NOT_REACHED: "at least ", verdict.GENERATOR: "at least "}.get(v["status"], "")
        cost = "" if v.get("cost_per_1k_rate") is None else f", at {cost_cell(v, cur)} per 1000 msg/s per month"
        return [f"{v['cluster']} carries {bound}{figure} within the SLO{cost}."]
    out = []
    top = [v for v in met if v.get("rank") == 1] or met[:1]
    names = " and ".join(str(v["cluster"]) for v in top)
    tie = " (a tie: the same figure)" if len(top) > 1 else ""
    figure = verdict.rate_text(top[0]["highest_met"])
    if top[0]["status"] == verdict.NOT_REACHED:
        figure = f"at least {figure} (capacity not reached)"
    elif top[0]["status"] == verdict.GENERATOR:
        figure = f"at least {figure} (the load generator was the limit above)"
    out.append(f"Most msg/s within the SLO: {names}, {figure}{tie}.")
    priced = sorted((v for v in met if v.get("cost_per_1k_rate") is not None),
                    key=lambda v: (round(v["cost_per_1k_rate"], 2), v["cluster"]))
    if priced:
        best = round(priced[0]["cost_per_1k_rate"], 2)
        cheap = [v for v in priced if round(v["cost_per_1k_rate"], 2) == best]
        tie = " (a tie)" if len(cheap) > 1 else ""
        out.append(f"Lowest cost per 1000 msg/s per month within the SLO: {' and '.join(str(v['cluster']) for v in cheap)}, "
                   f"{cost_cell(cheap[0], cur)}{tie}" + (" (an upper bound: capacity not reached)"
                                                        if cheap[0].get("cost_is_upper_bound") else "") + ".")
    return out


def verdict_markdown(board: dict[str, Any]) -> list[str]:
    if not board.get("verdicts"):
        return []
    lines = ["## Verdict: msg/s within the SLO, and at what cost", "", f"SLO: {slo_text(board)}.", ""]
    lines += [*headline(board), "", "| " + " | ".join(VERDICT_HEADERS) + " |", "|" + "---|" * len(VERDICT_HEADERS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in verdict_rows(board)]
    lines += ["", "≤: an upper bound — the cluster met every rate tried, so its cost per 1000 msg/s at capacity is at "
                  "most this. Equal figures share a rank (tie).", ""]
    return lines


def leaderboard_markdown(board: dict[str, Any], notes: list[str], meta: dict[str, Any]) -> str:
    """The leaderboard as Markdown: the verdict first, then each leaderboard with its rule."""
    cur = board["prices"]["currency"]
    lines = ["# rbench leaderboard", ""]
    lines += verdict_markdown(board)
    lines += [f"Runs: {', '.join(r['run_id'] + ' (' + r['status'] + ')' for r in meta['runs'])}", ""]
    lines += ["## Top throughput per cluster", "",
              f"Achieved consume rate of the cluster's best step. {meta['rate_method']}.", "",
              "| rank | cluster | step | target msg/s | consumed msg/s | e2e p99 | matched | broker CPU µs/msg | broker mem peak MiB |",
              "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(board["top_throughput"], 1):
        lines.append(f"| {rank_cell(r, i)} | {_who(r)} | {cell(r, 'step')} | {fmt(r['target_rate'])} | {fmt(r['consume_rate'])} | "
                     f"{fmt(r['e2e_p99_ms'], '_ms')} | {fmt(r['matched'])} | {fmt(r.get('broker_cpu_us_per_msg'))} | "
                     f"{fmt(r.get('broker_mem_peak_mb'))} |")
    lines += ["", "## Highest matched target per cluster", "", f"Rule: {meta['match_rule']} (p99 exact, from intended send time).", "",
              "| rank | cluster | step | target msg/s | consumed msg/s | e2e p99 | broker CPU µs/msg | broker mem peak MiB |",
              "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(board["highest_matched"], 1):
        lines.append(f"| {rank_cell(r, i)} | {_who(r)} | {cell(r, 'step')} | {fmt(r['target_rate'])} | {fmt(r['consume_rate'])} | "
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
        lines.append(f"| {rank_cell(r, i)} | {r['cluster']} | {r['nodes']} × {r['instance_type']} | {_cost(r, 'monthly_cost', cur)} | "
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
            lines.append(f"| {rank_cell(r, i)} | {r['cluster']} | {r['nodes']} × {r['instance_type']} | {_cost(r, 'monthly_cost', cur)} | "
                         f"{fmt(r['highest_matched_target'])} | {_cost(r, 'cost_per_1k_rate', cur)} |")
        if not board["cost_at_target"]:
            lines.append("(no cluster matched this target)")
    if notes:
        lines += ["", "## Notes (what is missing or was skipped)", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _table(headers: list[str], rows: list[list[str]], text_columns: tuple[int, ...] = ()) -> str:
    """An HTML table; ``text_columns`` (indexes) hold sentences and are set flush left."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td class='text'>{html.escape(c)}</td>" if i in text_columns else
                                    f"<td>{html.escape(c)}</td>" for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:20px 28px;color:#222;max-width:1500px}
h1{font-size:1.5em;margin:0 0 4px} h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#555;font-size:13px;margin:0 0 10px}
table{border-collapse:collapse;font-size:12px;margin:8px 0} th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3;position:sticky;top:0} td:nth-child(-n+2){text-align:left}
.method{color:#555;font-size:13px} .notes li{color:#8a4b00} img{max-width:100%;border:1px solid #eee;margin:6px 0}
.scroll{overflow-x:auto} td.text{text-align:left;max-width:520px}
#verdict{background:#f7f9fc;border:1px solid #d5dde8;border-radius:6px;padding:6px 16px 10px}
#verdict h2{margin-top:.4em;border:0}
.headline{font-size:17px;margin:6px 0} .slo{font-size:13px;color:#333}
table.verdict{font-size:14px;width:100%} table.verdict td,table.verdict th{vertical-align:top;text-align:left}
table.verdict td.cost{font-weight:600;font-size:15px;text-align:right;white-space:nowrap}
table.verdict td.num{text-align:right;white-space:nowrap} table.verdict td.answer{font-weight:600;font-size:15px}
table.verdict td.why{font-size:12px;color:#444;max-width:420px}
tr.not_reached td.answer{color:#1f5fa8} tr.bracketed td.answer{color:#17693a} tr.none_met td.answer{color:#a33}
tr.generator td.answer{color:#8a4b00}
.plots{display:grid;grid-template-columns:1fr 1fr;gap:8px} .plots img{width:100%}
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


def _verdict_html(board: dict[str, Any], notes: list[str]) -> str:
    """The first screen: the SLO, the answer in two sentences, and the verdict table."""
    parts = ["<section id='verdict'><h2>Verdict: msg/s within the SLO, and at what cost</h2>",
             f"<p class='slo'>SLO: {html.escape(slo_text(board))}.</p>"]
    parts += [f"<p class='headline'>{html.escape(line)}</p>" for line in headline(board)]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in VERDICT_HEADERS)
    rows = []
    classes = ["num", "", "", "answer num", "num", "why", "cost", "", "why"]
    for v, cells in zip(board.get("verdicts") or [], verdict_rows(board)):
        tds = "".join(f"<td class='{c}'>{html.escape(x)}</td>" for c, x in zip(classes, cells))
        rows.append(f"<tr class='{html.escape(str(v.get('status')))}'>{tds}</tr>")
    parts.append(f"<table class='verdict'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
    legend = ("Highest rate within the SLO: a rate search's answer, else the highest target rate a step matched. "
              "≥ and ≤: the cluster met every rate tried (or the load generator became the limit first), so its capacity "
              "is at least that rate and its cost per 1000 msg/s per month at capacity at most that figure. "
              "Equal figures share a rank (tie). Cost: monthly cost ÷ (rate / 1000). Generator-bound: on those steps the "
              "load generator, not the cluster, was the limit (its own lateness is inside their latency); add Spark tasks "
              "or executors and measure again.")
    if notes:
        legend += f" {len(notes)} note(s) on missing or skipped data: see below."
    parts.append(f"<p class='method'>{html.escape(legend)}</p></section>")
    return "\n".join(parts)


def _search_html(search: dict[str, Any], images: dict[str, Path]) -> str:
    rs = search.get("rate_search") or {}
    parts = ["<h2>Rate search: the probes, in order</h2>",
             f"<p class='method'>Probes of {rs.get('step', 0):g} s each, doubling from {rs.get('start', 0):g} msg/s per "
             f"producer until one fails, then bisecting until the bracket is within {rs.get('precision', 0):.0%} "
             f"(at most {rs.get('max_probes')} probes, never above {rs.get('max', 0):g} per producer); each decided "
             "on exact figures of its own samples before the next (docs/rate-search.md).</p>"]
    if "probes" in images:
        parts.append(_img(images["probes"], "rate search probes"))
    rows = []
    for c in search.get("clusters", []):
        for i, p in enumerate(c.get("probes") or [], 1):
            rows.append([str(c["cluster"]), str(i), verdict.rate_text(p["target"]), f"{p['rate']:g}",
                         "met" if p["passed"] else "failed", fmt(p.get("consume_rate")), fmt(p.get("e2e_p99_ms"), "_ms"),
                         fmt(p.get("send_lag_p99_ms"), "_ms"), str(p.get("generator") or "–"), str(p.get("why"))])
        rows.append([str(c["cluster"]), "answer", "", "", "", "", "", "", "", str(c.get("answer", ""))])
    parts.append(_table(["cluster", "probe", "target", "per producer", "SLO", "consumed/s", "e2e p99", "send lateness p99",
                         "generator", "why"], rows, text_columns=(8, 9)))
    return "\n".join(parts)


def _methodology_html(notes: list[str], meta: dict[str, Any]) -> str:
    parts = ["<section id='methodology'><h2>Methodology: how each number is measured</h2><ul class='method'>"]
    for item in ["verdict: per cluster, the highest rate that met the SLO (a rate search's answer, else the highest "
                 "matched target) and the first rate above it that failed; 'capacity not reached' when every rate tried "
                 "met it (its figure is then a lower bound and its cost an upper bound); a failure on a step where the "
                 "load generator was the limit is the generator's, not the cluster's",
                 "cost per 1000 msg/s per month: the cluster's monthly cost (conf/costs.yaml) ÷ (rate / 1000)",
                 "ranks: equal figures (as printed) share a rank and are marked tie",
                 meta["rate_method"], meta["measured_set"], "percentiles: " + meta["percentile_method"],
                 *[f"{k}: {v}" for k, v in meta["latencies"].items()], meta["match_rule"],
                 "lost: measured published message with outcome ack, unconfirmed or connection_lost never received by any "
                 "consumer in the run",
                 "duplicated: measured message (same producer + seq) received more than once; reordered: delivery whose seq is "
                 "lower than one already received from the same producer on the same queue (receive order t_received, ties by seq)",
                 "nacked / returned / confirm timeout / unconfirmed / connection lost: measured published messages by "
                 "outcome (connection lost: published, and the connection died before its confirm came; not sent again)",
                 "timeline: " + meta["timeline_method"] + "; throughput is drawn for whole seconds of the schedule only "
                 "(a partly covered second is not a drop)", meta.get("stale_method", STALE_MEANING),
                 meta.get("step_numbering", STEP_NUMBERING), f"clock: {meta['runs'][0].get('clock')}"]:
        parts.append(f"<li>{html.escape(str(item))}</li>")
    parts.append("</ul></section>")
    return "\n".join(parts)


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
             f"{html.escape(str(runs[0].get('started_at')))} → {html.escape(str(runs[-1].get('ended_at')))}</p>"]
    parts.append(_verdict_html(board, notes))
    if search:
        parts.append(_search_html(search, images))
    parts.append("<h2>Capacity curves</h2><p class='method'>x = the target rate (msg/s) of each step; filled markers met "
                 "the SLO. The knee plot puts latency against what was really delivered: where p99 turns up, queueing "
                 "starts to set the latency.</p><div class='plots'>")
    parts.append(_img(images["throughput"], "achieved vs target throughput") + _img(images["knee"], "latency against achieved throughput"))
    parts.append("</div>")
    parts.append(_img(images["latency"], "end-to-end latency per target rate"))
    parts.append(_img(images["confirm"], "confirm latency per target rate"))
    parts.append("<h2>Within the run</h2>" + _img(images["timeline"], "throughput and latency over time"))
    if faults and faults.get("faults"):
        parts.append(faults_html(faults, images.get("faults")))
    if "broker" in images:
        parts.append("<h2>The broker's side</h2><p class='method'>" + html.escape(str(meta.get("broker_method", "")))
                     + "</p>" + _img(images["broker"], "queue depth, broker memory and CPU over time"))
    md = leaderboard_markdown({k: v for k, v in board.items() if k != "verdicts"}, [], meta)
    parts.append("<h2>Leaderboards</h2>")
    parts.append(_md_tables_to_html(md))
    if phases:
        parts.append("<h2>Backlog phases</h2><p class='method'>Per consumer.pause phase (docs/broker.md): build-up rate and "
                     "peak backlog from the broker's depth samples and from client counts (copies expected − received); "
                     "drain time from resuming until the depth is at most drained_below; e2e latency of the messages sent "
                     "in the phase. Same table: phases.csv.</p>")
        parts.append(_table([h for _, h in PHASE_HEADERS], [[fmt(p.get(k), k) for k, _ in PHASE_HEADERS] for p in phases]))
    parts.append("<h2>All steps</h2><p class='method'>Latencies in ms, exact; rates in msg/s over the measurement window; "
                 "counts over measured messages. Same table: steps.csv / steps.parquet.</p><div class='scroll'>")
    parts.append(steps_table_html(steps))
    parts.append("</div>")
    if notes:
        parts.append("<h2 id='notes'>What is missing or was skipped</h2><ul class='notes'>"
                     + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    run_rows = [[r["run_id"], str(r["status"]), str(r["workload_name"]), str(r["workload_hash"]), f"{r['warmup_s']:g} s",
                 str(r["driver"]), str(r["started_at"]), str(r["ended_at"])] for r in runs]
    parts.append("<h2>Runs</h2>" + _table(["run", "status", "workload", "workload_hash", "warm-up excluded per step",
                                            "driver", "started", "ended"], run_rows))
    parts.append(_methodology_html(notes, meta))
    parts.append("</body></html>")
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
    images = {
        "throughput": plots.throughput_plot(steps, out_dir / "throughput.png", probing),
        "knee": plots.knee_plot(steps, out_dir / "latency_vs_throughput.png", probing, slo_ms),
        "latency": plots.latency_plot(steps, out_dir / "latency.png", "e2e", probing, slo_ms),
        "confirm": plots.latency_plot(steps, out_dir / "confirm_latency.png", "confirm", probing),
        "timeline": plots.timeline_plot(timeline, steps, out_dir / "timeline.png", probing, faults=fault_rows),
    }
    if search is not None:
        images["probes"] = plots.probes_plot(search, out_dir / "probes.png")
    if fault_rows:
        images["faults"] = plots.fault_plot(fault_rows, out_dir / "faults.png")
    if broker:
        from rbench.report.broker_plots import broker_plot
        images["broker"] = broker_plot(timeline, broker, phases or [], out_dir / "broker.png", steps, probing,
                                       faults=fault_rows)
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
