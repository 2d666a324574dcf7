"""The report's sections that are more than a plot: the verdict, the rate search's probes, the faults
and the methodology."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from rbench.reduce import verdict
from rbench.report.figures import cell, fmt
from rbench.report.html_parts import img, table
from rbench.report.verdict_text import VERDICT_HEADERS, headline, slo_text, verdict_rows
from rbench.samples.conventions import STALE_MEANING, STEP_NUMBERING

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
        parts.append(f"<h3>{html.escape(title)}</h3>" + table(["figure", "this fault", "whole run", "how it is measured"], rows))
    if image is not None:
        parts.append(img(image, "publish, confirm and consume rates around each fault"))
    return "\n".join(parts)


def verdict_html(board: dict[str, Any], notes: list[str]) -> str:
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


def search_html(search: dict[str, Any], images: dict[str, Path]) -> str:
    rs = search.get("rate_search") or {}
    parts = ["<h2>Rate search: the probes, in order</h2>",
             f"<p class='method'>Probes of {rs.get('step', 0):g} s each, doubling from {rs.get('start', 0):g} msg/s per "
             f"producer until one fails, then bisecting until the bracket is within {rs.get('precision', 0):.0%} "
             f"(at most {rs.get('max_probes')} probes, never above {rs.get('max', 0):g} per producer); each decided "
             "on exact figures of its own samples before the next (docs/rate-search.md).</p>"]
    if "probes" in images:
        parts.append(img(images["probes"], "rate search probes"))
    rows = []
    for c in search.get("clusters", []):
        for i, p in enumerate(c.get("probes") or [], 1):
            rows.append([str(c["cluster"]), str(i), verdict.rate_text(p["target"]), f"{p['rate']:g}",
                         "met" if p["passed"] else "failed", fmt(p.get("consume_rate")), fmt(p.get("e2e_p99_ms"), "_ms"),
                         fmt(p.get("send_lag_p99_ms"), "_ms"), str(p.get("generator") or "–"), str(p.get("why"))])
        rows.append([str(c["cluster"]), "answer", "", "", "", "", "", "", "", str(c.get("answer", ""))])
    parts.append(table(["cluster", "probe", "target", "per producer", "SLO", "consumed/s", "e2e p99", "send lateness p99",
                         "generator", "why"], rows, text_columns=(8, 9)))
    return "\n".join(parts)


def methodology_html(notes: list[str], meta: dict[str, Any]) -> str:
    parts = ["<section id='methodology'><h2>Methodology: how each number is measured</h2><ul class='method'>"]
    for item in ["verdict: per cluster, the highest rate that met the SLO (a rate search's answer, else the highest "
                 "matched target) and the first rate above it that failed; 'capacity not reached' when every rate tried "
                 "met it (its figure is then a lower bound and its cost an upper bound); a failure on a step where the "
                 "load generator was the limit is the generator's, not the cluster's",
                 "cost per 1000 msg/s per month: the cluster's monthly cost (conf/costs.yaml) ÷ (rate / 1000)",
                 "ranks: equal figures (as printed) share a rank and are marked tie",
                 meta["rate_method"], meta["measured_set"], "percentiles: " + meta["percentile_method"],
                 *[f"{k}: {v}" for k, v in meta["latencies"].items()], meta["match_rule"],
                 "lost: expected copy of a measured published message with outcome ack, unconfirmed or connection_lost "
                 "never received in the run by its reader (the consumers of its queue together; each plain consumer of a "
                 "stream for itself)",
                 "duplicated: measured copy (same producer + seq on the same queue, for the same reader) received more than "
                 "once; reordered: delivery whose seq is lower than one the same consumer already received from the same "
                 "producer on the same queue (receive order t_received, ties by seq): RabbitMQ keeps order per consumer",
                 "nacked / returned / confirm timeout / unconfirmed / connection lost: measured published messages by "
                 "outcome (connection lost: published, and the connection died before its confirm came; not sent again)",
                 *([meta["unroutable_method"]] if meta.get("unroutable_method") else []),
                 *([meta["connect_method"]] if meta.get("connect_method") else []),
                 *([meta["churn_method"]] if meta.get("churn_method") else []),
                 "timeline: " + meta["timeline_method"] + "; throughput is drawn for whole seconds of the schedule only "
                 "(a partly covered second is not a drop)", meta.get("stale_method", STALE_MEANING),
                 meta.get("step_numbering", STEP_NUMBERING), f"clock: {meta['runs'][0].get('clock')}"]:
        parts.append(f"<li>{html.escape(str(item))}</li>")
    parts.append("</ul></section>")
    return "\n".join(parts)
