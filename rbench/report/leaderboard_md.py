"""leaderboard.md: the verdict first, then each leaderboard with its rule (also the report's Leaderboards section)."""
from __future__ import annotations

from typing import Any

from rbench.reduce.costs import is_priced
from rbench.report.figures import cell, fmt, money, rank_cell
from rbench.report.verdict_text import verdict_markdown


def _who(row: dict[str, Any]) -> str:
    """The cluster's name, marked when its step was limited by the load generator (rbench.samples.generator)."""
    return f"{row['cluster']} (generator-bound: see notes)" if row.get("generator_bound") else str(row["cluster"])


def _cost(row: dict[str, Any], key: str, currency: str) -> str:
    """A cost cell: "no price" when the cluster's types are missing from the price list or priced 0."""
    return "no price" if not is_priced(row.get("monthly_cost")) else money(row[key], currency)


def broker_lines(meta: dict[str, Any]) -> list[str]:
    """What each run was measured on (run.json clusters[].broker), one line per run and cluster; [] for runs
    that did not record it. Runs on different brokers are compared with their broker named."""
    found = [f"- {r['run_id']}, cluster {c}: {line}" for r in meta["runs"] for c, line in (r.get("brokers") or {}).items()]
    return ["Brokers:", ""] + found + [""] if found else []


def connections_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The cost of holding connections: idle connections per GiB of broker memory ([] when no run measured it)."""
    if not rows:
        return []
    lines = ["", "## Connections per GiB of broker memory", "",
             "Idle connections one GiB of broker memory holds: 1 GiB ÷ broker_mem_per_connection_kib, the broker's "
             "mem_used rise while the run's idle connections opened ÷ their number (the run with the most idle "
             "connections per cluster; docs/connections.md). The connection processes' share (management memory "
             "breakdown: connection readers, writers, channels, other) beside it.", "",
             "| rank | cluster | run | idle connections | broker KiB per connection | connection processes KiB "
             "| connections per GiB | connect p99 | broker |", "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        per_gib = r.get("connections_per_gib")
        lines.append(f"| {rank_cell(r, i)} | {r['cluster']} | {r['run_id']} | {fmt(r.get('idle_connections'))} | "
                     f"{fmt(r.get('broker_mem_per_connection_kib'))} | {fmt(r.get('broker_conn_mem_per_connection_kib'))} "
                     f"| {'–' if per_gib is None else f'{per_gib:,.0f}'} | {fmt(r.get('connect_p99_ms'), '_ms')} "
                     f"| {fmt(r.get('broker'))} |")
    return lines


def leaderboard_markdown(board: dict[str, Any], notes: list[str], meta: dict[str, Any]) -> str:
    """The leaderboard as Markdown: the verdict first, then each leaderboard with its rule."""
    cur = board["prices"]["currency"]
    lines = ["# rbench leaderboard", ""]
    lines += verdict_markdown(board)
    lines += [f"Runs: {', '.join(r['run_id'] + ' (' + r['status'] + ')' for r in meta['runs'])}", ""]
    lines += broker_lines(meta)
    lines += ["## Top throughput per cluster", "",
              f"Achieved consume rate of the cluster's best step. {meta['rate_method']}.", "",
              "| rank | cluster | step | target msg/s | consumed msg/s | e2e p99 | matched | broker CPU µs/msg | broker mem peak MiB "
              "| broker |", "|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(board["top_throughput"], 1):
        lines.append(f"| {rank_cell(r, i)} | {_who(r)} | {cell(r, 'step')} | {fmt(r['target_rate'])} | {fmt(r['consume_rate'])} | "
                     f"{fmt(r['e2e_p99_ms'], '_ms')} | {fmt(r['matched'])} | {fmt(r.get('broker_cpu_us_per_msg'))} | "
                     f"{fmt(r.get('broker_mem_peak_mb'))} | {fmt(r.get('broker'))} |")
    lines += ["", "## Highest matched target per cluster", "", f"Rule: {meta['match_rule']} (p99 exact, from intended send time).", "",
              "| rank | cluster | step | target msg/s | consumed msg/s | e2e p99 | broker CPU µs/msg | broker mem peak MiB | broker |",
              "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(board["highest_matched"], 1):
        lines.append(f"| {rank_cell(r, i)} | {_who(r)} | {cell(r, 'step')} | {fmt(r['target_rate'])} | {fmt(r['consume_rate'])} | "
                     f"{fmt(r['e2e_p99_ms'], '_ms')} | {fmt(r.get('broker_cpu_us_per_msg'))} | {fmt(r.get('broker_mem_peak_mb'))} | "
                     f"{fmt(r.get('broker'))} |")
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
    lines += connections_lines(board.get("connections_per_gib") or [])
    if notes:
        lines += ["", "## Notes (what is missing or was skipped)", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
