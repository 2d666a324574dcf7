"""The generator self-check's rule: when was the load generator, not the broker, the limit?

Shared by the status line (live figures), the reduce (exact send lag) and the report, so the
three cannot disagree. The figures come from rbench.runtime.selfcheck (per task, per second
and per step); docs/timing.md explains the rule and its thresholds.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CPU_BOUND = 0.9                # a task at ≥ 90 % of one core is the limit
SEND_LAG_P99_MS = 10.0         # sends this late (p99) …
LOOP_LAG_P99_MS = 5.0          # … while the task's own loop was this late (p99) and its window had room
WINDOW_MOSTLY_FULL = 0.5       # window full in at least half the probes: waiting on the broker


def live_flag(figures: dict[str, Any]) -> str | None:
    """For the status line: why this second looks generator-bound, or None.

    Live there is no exact send lag, so a busy core or a late loop with room in the window is
    enough to warn; the step's verdict (``judge``) is the one that counts."""
    if figures.get("cpu", 0.0) >= CPU_BOUND:
        return f"task CPU {figures['cpu']:.0%}"
    if figures.get("loop_lag_p99_ms", 0.0) >= LOOP_LAG_P99_MS and figures.get("window_full", 0.0) < WINDOW_MOSTLY_FULL:
        return f"task's event loop {figures['loop_lag_p99_ms']:.0f} ms late"
    return None


def judge(tasks: Sequence[Mapping[str, float]], send_lag_p99_ms: float | None) -> str | None:
    """The verdict for one step: None, or why the generator (not the broker) was the limit.

    ``tasks``: each task's figures for the step (``SelfCheck.steps()``); ``send_lag_p99_ms``: the
    reduce's exact p99 of t_sent − t_intended over the step's measured messages.

    Generator-bound when (a) a task used at least 90 % of a core (an asyncio task cannot use
    more), or (b) sends left late (p99 ≥ 10 ms) while some task's own loop was late (p99 ≥ 5 ms)
    with room in its confirm window. Late sends with an idle loop mean the producers were held
    back by the broker (confirm window, flow control, TCP backpressure): that is the broker's limit."""
    reasons = []
    busiest = max(tasks, key=lambda t: t.get("cpu", 0.0), default=None)
    if busiest is not None and busiest.get("cpu", 0.0) >= CPU_BOUND:
        reasons.append(f"a task used {busiest['cpu']:.0%} of a core")
    lagging = [t for t in tasks if t.get("loop_lag_p99_ms", 0.0) >= LOOP_LAG_P99_MS
               and t.get("window_full", 0.0) < WINDOW_MOSTLY_FULL]
    if lagging and send_lag_p99_ms is not None and send_lag_p99_ms >= SEND_LAG_P99_MS:
        reasons.append(f"sends left {send_lag_p99_ms:.1f} ms late (p99) while a task's event loop ran "
                       f"{max(t['loop_lag_p99_ms'] for t in lagging):.0f} ms late with room in its confirm window")
    if not reasons:
        return None
    return "; ".join(reasons) + ": the load generator was the limit; add Spark tasks or executors (--tasks, tasks:)"
