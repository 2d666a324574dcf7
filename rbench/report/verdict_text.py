"""The verdict in words and cells: the SLO, the two-sentence answer and the verdict table's rows, shared by
report.html and leaderboard.md (the verdicts themselves come from rbench.reduce.verdict)."""
from __future__ import annotations

from typing import Any

from rbench.reduce import verdict
from rbench.reduce.costs import is_priced
from rbench.report.figures import fmt, money, rank_cell


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
    if v["status"] == verdict.UNROUTABLE:
        return f"≥ {verdict.rate_text(hi)} (messages unroutable above)"
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
    return ("≤ " if v.get("cost_is_upper_bound") else "") + money(v["cost_per_1k_rate"], currency)


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
        bound = {verdict.NOT_REACHED: "at least ", verdict.GENERATOR: "at least ",
                 verdict.UNROUTABLE: "at least "}.get(v["status"], "")
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
