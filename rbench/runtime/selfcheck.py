"""The generator checks itself: was a step limited by the broker, or by this task?

A step that misses its target reads as "the broker cannot sustain this rate" unless the
load generator shows it was not the one falling behind. Each task measures, per second
and per step, what only it can know:

- ``cpu``: its process's CPU time (getrusage, user + system) over wall time; 1.0 is one
  core busy. An asyncio task cannot use more than one core, so near 1.0 it is saturated.
- ``loop_lag``: how late a 10 ms event-loop timer fires (p99 and max, ms). A busy loop
  delays every send, confirm and delivery by that much.
- ``window_full``: the share of 10 ms probes in which the task's unconfirmed messages filled
  at least 90 % of its producers' confirm windows combined. A full window means the task is
  waiting for the broker's confirms: lateness then is the broker's, not the generator's.

The verdict per step combines these with the reduce's exact send lag (t_sent − t_intended,
p99): rbench.samples.generator holds that rule, shared by the status line, the summary and
the reduce; docs/timing.md states it.
"""
from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field

PROBE_S = 0.01                 # loop-lag probe period; also how often the window is sampled
WINDOW_FULL_AT = 0.9           # unconfirmed ≥ this share of the combined window counts as full

def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@dataclass
class _Span:
    """What was seen over one second or one step."""

    wall0: float
    cpu0: float
    lags_ms: list[float] = field(default_factory=list)
    probes: int = 0
    full: int = 0

    def figures(self, wall1: float, cpu1: float) -> dict[str, float]:
        wall = max(wall1 - self.wall0, 1e-9)
        return {"cpu": round((cpu1 - self.cpu0) / wall, 4), "loop_lag_p99_ms": round(_p99(self.lags_ms), 3),
                "loop_lag_max_ms": round(max(self.lags_ms, default=0.0), 3),
                "window_full": round(self.full / self.probes, 4) if self.probes else 0.0, "seconds": round(wall, 3)}


class SelfCheck:
    """Runs beside a task's producers on its loop; ``second()`` and ``steps()`` read the figures."""

    def __init__(self, in_flight: Callable[[], int], window: int, step_of: Callable[[], int]) -> None:
        self._in_flight = in_flight
        self._full_at = WINDOW_FULL_AT * window if window > 0 else None
        self._step_of = step_of
        now, cpu = time.monotonic(), _cpu_s()
        self._second = _Span(now, cpu)
        self._steps: dict[int, dict[str, float]] = {}
        self._step: int | None = None
        self._step_span = _Span(now, cpu)

    async def run(self) -> None:
        """Probe until cancelled; spans start here (at t0), so set-up work is not counted."""
        loop = asyncio.get_running_loop()
        now, cpu = time.monotonic(), _cpu_s()
        self._second, self._step_span = _Span(now, cpu), _Span(now, cpu)
        while True:
            due = loop.time() + PROBE_S
            await asyncio.sleep(PROBE_S)
            lag_ms = max(0.0, (loop.time() - due) * 1e3)
            full = self._full_at is not None and self._in_flight() >= self._full_at
            step = self._step_of()
            if step != self._step:
                self._close_step()
                self._step = step
            for span in (self._second, self._step_span):
                span.lags_ms.append(lag_ms)
                span.probes += 1
                span.full += full

    def _close_step(self) -> None:
        now, cpu = time.monotonic(), _cpu_s()
        if self._step is not None and self._step_span.probes:
            self._steps[self._step] = self._step_span.figures(now, cpu)
        self._step_span = _Span(now, cpu)

    def second(self) -> dict[str, float]:
        """Figures since the last call (the task's per-second progress line carries them)."""
        now, cpu = time.monotonic(), _cpu_s()
        figures = self._second.figures(now, cpu)
        self._second = _Span(now, cpu)
        return figures

    def steps(self) -> dict[str, dict[str, float]]:
        """Per step index (as a string: it goes to run.json), the step's figures; call once at the end."""
        self._close_step()
        self._step = None
        return {str(k): v for k, v in sorted(self._steps.items())}
