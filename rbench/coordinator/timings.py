"""Where the wall-clock seconds of `rbench run` go (``--timings``), so waiting around the load is visible.

Marks are wall-clock instants from the coordinator (probe, session, plan, stage end, reduce) and from
the tasks (first task connected, the agreed t0, the end of the load); the table prints them in time
order with the seconds since the previous mark and since the command started.
"""
from __future__ import annotations

import time

from rbench.proctime import process_started


class Timings:
    def __init__(self) -> None:
        """Counted from the process's start (the interpreter and rbench's imports included), else from now."""
        started = process_started()
        self.marks: list[tuple[str, float]] = [("command started (the process)", started)] if started else []
        self.marks.append(("rbench imported, options read", time.time()))

    def mark(self, label: str, at: float | None = None) -> None:
        """Record ``label`` now, or at wall-clock ``at`` (seconds) for an instant a task reported."""
        self.marks.append((label, time.time() if at is None else at))

    def table(self) -> str:
        ordered = sorted(self.marks, key=lambda m: m[1])
        start, previous = ordered[0][1], ordered[0][1]
        lines = [f"{'since start':>12} {'step':>8}  what (wall clock; task instants as the tasks reported them)"]
        for label, t in ordered:
            lines.append(f"{t - start:11.2f}s {t - previous:7.2f}s  {label}")
            previous = t
        return "\n".join(lines)
