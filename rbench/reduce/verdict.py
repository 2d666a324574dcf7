"""The answer per cluster: how many msg/s it carries within the SLO, where it fails, at what cost.

A capacity planner reads this first (the report's verdict table, leaderboard.json ``verdicts``).
For a rate search the answer is the search's own (search.json: highest rate that met the SLO,
first that failed, how the search ended); for stepped runs it is read off the steps with the
reduce's match rule: the highest matched target, and the lowest unmatched target above it.

A cluster that met every step (or every probe up to the search's maximum) has not shown its
capacity: its figure is a lower bound ("capacity not reached: above X msg/s"), so its cost per
1000 msg/s is an upper bound ("≤"). A failure on a step where the load generator was the limit
(rbench.samples.generator) is the generator's, not the cluster's: the capacity above the last
met rate is unknown, and the cost figure is an upper bound too. So is a failure whose missing
messages the broker dropped as unroutable (rbench.reduce.unroutable): routed to no queue is a
binding to fix, not a rate to lower.
"""
from __future__ import annotations

from typing import Any

from rbench.reduce.costs import cost_per_krate, is_priced
from rbench.reduce.ranking import rank
from rbench.reduce.unroutable import dropped_of_lost

Row = dict[str, Any]

# how the answer ended, in leaderboard.json ``verdicts[].status``
BRACKETED = "bracketed"          # met at one rate, failed at the next above it: capacity in between
NOT_REACHED = "not_reached"      # met every step/probe: capacity above the highest
GENERATOR = "generator"          # the generator was the limit before the cluster failed
NONE_MET = "none_met"            # not even the lowest rate met the SLO
NO_TARGET = "no_target"          # no step had a target rate (unlimited): nothing to judge
UNROUTABLE = "unroutable"        # the first failure's missing messages were dropped by the broker as unroutable


def rate_text(rate: float | None) -> str:
    """A rate in a sentence: whole msg/s with separators (bisected rates keep one decimal)."""
    if rate is None:
        return "–"
    return f"{rate:,.0f} msg/s" if float(rate).is_integer() or rate >= 1000 else f"{rate:,.1f} msg/s"


def why_failed(step: Row, tolerance: float, latency_limit_ms: float) -> str:
    """What a step missed, in the match rule's terms (the reduce's figures), and whose the shortfall was: the
    publishers held back (sent below the target: the broker's confirm window, flow control or TCP back-pressure,
    unless the generator self-check blames the generator) or the consumers behind what was sent."""
    reasons = []
    target, rate, p99 = step.get("target_rate"), step.get("consume_rate"), step.get("e2e_p99_ms")
    sent = step.get("publish_rate")
    if target is not None and (rate is None or rate < (1.0 - tolerance) * target):
        reasons.append(f"consumed {rate or 0:,.0f} msg/s < {1.0 - tolerance:.0%} of target")
        if sent is not None and sent < (1.0 - tolerance) * target and not step.get("generator_bound"):
            reasons.append(f"the broker held the publishers back: sent {sent:,.0f} msg/s while the schedule "
                           f"offered {target:,.0f}")
        elif sent is not None and rate is not None and rate < (1.0 - tolerance) * sent:
            reasons.append(f"the consumers fell behind the {sent:,.0f} msg/s sent")
    if p99 is None:
        reasons.append("nothing consumed")
    elif p99 > latency_limit_ms:
        reasons.append(f"e2e p99 {_ms(p99)} > {_ms(latency_limit_ms)}")
    dropped = dropped_of_lost(step)
    if dropped:
        reasons.append(f"of {step['lost']:,} lost, up to {dropped:,} dropped by the broker as unroutable (routed to no "
                       f"queue)")
    return "; ".join(reasons) or "did not match"


def _ms(v: float) -> str:
    return f"{v / 1000:,.3g} s" if v >= 1000 else f"{v:,.3g} ms"


def _generator_steps(rows: list[Row]) -> list[Row]:
    return [{"target_rate": r.get("target_rate"), "run_id": r.get("run_id"), "step": r.get("step"),
             "note": r.get("generator_note") or "generator-bound"} for r in rows if r.get("generator_bound")]


def from_steps(cluster: str, rows: list[Row], tolerance: float, latency_limit_ms: float) -> Row:
    """A stepped run's answer: highest matched target, the first unmatched target above it. A step without a
    measurement window (warm-up and the producers' start took it all) measured nothing and is not judged."""
    judged = [r for r in rows if r.get("target_rate") is not None and (r.get("window_s") is None or r["window_s"] > 0)]
    met = [r for r in judged if r.get("matched")]
    best = max(met, key=lambda r: (r["target_rate"], r.get("consume_rate") or 0.0), default=None)
    highest = None if best is None else float(best["target_rate"])
    above = [r for r in judged if not r.get("matched") and (highest is None or r["target_rate"] > highest)]
    fail = min(above, key=lambda r: (r["target_rate"], str(r.get("run_id")), r.get("step", 0)), default=None)
    below = sorted({float(r["target_rate"]) for r in judged if not r.get("matched") and highest is not None
                    and r["target_rate"] < highest})
    v: Row = {"cluster": cluster, "kind": "steps", "highest_met": highest,
              "met_consume_rate": None if best is None else best.get("consume_rate"),
              "met_e2e_p99_ms": None if best is None else best.get("e2e_p99_ms"),
              "first_failed": None if fail is None else float(fail["target_rate"]),
              "failed_why": None if fail is None else why_failed(fail, tolerance, latency_limit_ms),
              "failed_below": below, "generator_steps": _generator_steps(rows), "ended_by": None,
              "generator_checked": any(r.get("generator_bound") is not None for r in rows), "steps": len(judged)}
    if not judged:
        v["status"] = NO_TARGET
    elif fail is not None and fail.get("generator_bound"):
        v["status"] = GENERATOR if highest is not None else NONE_MET
        v["failed_why"] = f"{v['failed_why']}; {fail.get('generator_note') or 'the generator was the limit'}"
    elif highest is None:
        v["status"] = NONE_MET
    elif fail is None:
        v["status"] = NOT_REACHED
    else:
        v["status"] = BRACKETED
    return v


def from_search(cluster: str, answer: Row, rows: list[Row]) -> Row:
    """A rate search's answer (search.json), with the generator flags of its probes' steps."""
    probes = answer.get("probes") or []
    best = next((p for p in probes if p.get("passed") and p.get("target") == answer.get("highest_pass")), None)
    fail = next((p for p in probes if not p.get("passed") and p.get("target") == answer.get("first_fail")), None)
    gen = next((p for p in probes if p.get("generator")), None)
    ended = str(answer.get("ended_by") or "")
    v: Row = {"cluster": cluster, "kind": "search", "highest_met": answer.get("highest_pass"),
              "met_consume_rate": None if best is None else best.get("consume_rate"),
              "met_e2e_p99_ms": None if best is None else best.get("e2e_p99_ms"),
              "first_failed": answer.get("first_fail"), "failed_why": None if fail is None else fail.get("why"),
              "failed_below": [], "ended_by": ended, "steps": len(probes), "generator_checked": True,
              "generator_steps": _generator_steps(rows) or ([{"target_rate": gen.get("target"), "run_id": gen.get("run_id"),
                                                              "step": 0, "note": gen.get("generator")}] if gen else [])}
    if gen is not None and ended.startswith("stopped:"):
        v["status"] = GENERATOR if v["highest_met"] is not None else NONE_MET
        v["failed_why"] = f"stopped at {rate_text(gen.get('target'))}: {gen.get('generator')}"
        if v["first_failed"] is None:
            v["first_failed"] = gen.get("target") if not gen.get("passed") else None
    elif v["highest_met"] is None:
        v["status"] = NONE_MET
    elif v["first_failed"] is None:
        v["status"] = NOT_REACHED
    else:
        v["status"] = BRACKETED
    return v


def sentence(v: Row) -> str:
    """The verdict in one line, as a planner would say it (the figures behind it are in the other columns)."""
    hi, fail, status = v["highest_met"], v["first_failed"], v["status"]
    unit = "probe" if v["kind"] == "search" else "step"
    if status == NO_TARGET:
        return "No step had a target rate (unlimited rate): no SLO verdict; see top throughput."
    if status == UNROUTABLE:
        why = (f"at {rate_text(fail)} the broker dropped up to {v.get('unroutable_dropped') or 0:,} messages as unroutable "
               f"(accepted, routed to no queue: no binding matched, published without mandatory): check the exchange, "
               f"routing key and bindings, then run again")
        return (f"Met the SLO up to {rate_text(hi)}; not a capacity figure above it: {why}." if hi is not None
                else f"No capacity figure: {why}.")
    if status == NONE_MET:
        return (f"Fails the SLO at every rate tried, from {rate_text(fail)}: try lower rates." if fail is not None
                else f"No {unit} met the SLO.")
    if status == NOT_REACHED:
        return f"Capacity not reached: above {rate_text(hi)} (every {unit} met the SLO); try higher rates."
    if status == GENERATOR:
        return (f"Capacity unknown above {rate_text(hi)}: the load generator, not the cluster, was the limit there; "
                f"add tasks or executors.")
    width = (fail - hi) / hi if hi else 0.0
    hint = "; a rate search between them narrows it" if v["kind"] == "steps" and width > 0.5 else ""
    text = f"Capacity between {rate_text(hi)} and {rate_text(fail)} (bracket {width:.0%}{hint})."
    if v.get("failed_below"):
        text += f" Not monotonic: also failed at {', '.join(rate_text(r) for r in v['failed_below'])}."
    return text


def _unroutable(v: Row, rows: list[Row]) -> None:
    """A failure at the first failed rate whose lost messages the broker dropped as unroutable is no capacity
    limit: the verdict says so (status UNROUTABLE, ``unroutable_dropped``: up to how many) instead of a bracket
    or "try lower rates"."""
    if v["status"] not in (NONE_MET, BRACKETED) or v.get("first_failed") is None:
        return
    at = [r for r in rows if not r.get("matched") and r.get("target_rate") == v["first_failed"] and dropped_of_lost(r)]
    if at:
        v["status"] = UNROUTABLE
        v["unroutable_dropped"] = sum(dropped_of_lost(r) for r in at)


def verdicts(steps: list[Row], costs: list[Row], tolerance: float, latency_limit_ms: float,
             search: dict[str, Any] | None = None) -> list[Row]:
    """One verdict per cluster, ranked by the highest rate that met the SLO (equal rates tie)."""
    answers = {str(a["cluster"]): a for a in (search or {}).get("clusters", [])}
    by_cluster: dict[str, list[Row]] = {}
    for s in steps:
        by_cluster.setdefault(str(s["cluster"]), []).append(s)
    price = {str(c["cluster"]): c for c in costs}
    out = []
    for cluster in sorted(set(by_cluster) | set(answers)):
        rows = by_cluster.get(cluster, [])
        v = from_search(cluster, answers[cluster], rows) if cluster in answers else \
            from_steps(cluster, rows, tolerance, latency_limit_ms)
        _unroutable(v, rows)
        c = price.get(cluster, {})
        v.update({"nodes": c.get("nodes"), "instance_type": c.get("instance_type"), "volume_type": c.get("volume_type"),
                  "monthly_cost": c.get("monthly_cost"),
                  "cost_per_1k_rate": cost_per_krate(c.get("monthly_cost"), v["highest_met"]),
                  # capacity at least the figure: the cost per 1000 msg/s at capacity is at most this one
                  "cost_is_upper_bound": v["status"] in (NOT_REACHED, GENERATOR, UNROUTABLE)})
        v["verdict"] = sentence(v)
        out.append(v)
    out.sort(key=lambda v: (v["highest_met"] is None, -(v["highest_met"] or 0.0), v["cluster"]))
    return rank(out, lambda v: v["highest_met"])


def lines(board: dict[str, Any]) -> list[str]:
    """The verdicts as the CLI prints them, one line per cluster in rank order (cost marked "≤" when a bound)."""
    currency = (board.get("prices") or {}).get("currency", "USD")
    out = []
    for v in board.get("verdicts") or []:
        place = "–" if v.get("rank") is None else f"{v['rank']}{' (tie)' if v.get('tie') else ''}"
        cost = ""
        if not is_priced(v.get("monthly_cost")):
            cost = " Cost per 1000 msg/s per month: no price."
        elif v.get("cost_per_1k_rate") is not None:
            cost = (f" Cost per 1000 msg/s per month: {'≤ ' if v.get('cost_is_upper_bound') else ''}"
                    f"{v['cost_per_1k_rate']:,.2f} {currency}.")
        out.append(f"verdict {place} {v['cluster']}: {v['verdict']}{cost}")
    return out
