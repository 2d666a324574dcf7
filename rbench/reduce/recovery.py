"""The rules behind the fault figures (docs/reduce.md, "Faults"), as plain functions of per-second counts.

No Spark: the counts come from the reduce's counting pass (the same 1 s buckets since the cluster's t0
as the timeline), so each rule can be unit-tested on a handful of numbers.

* **fault window**: what a fault is held responsible for and what its plot shows: from
  ``FAULT_BEFORE_S`` before the fault started to ``FAULT_AFTER_S`` after the node was back (after the
  end of the cluster's load when it never came back). Messages belong to it by ``t_sent``.
* **consume rate back** (``consume_recovery``): the pre-fault mean is the mean per-second consume rate
  over the whole seconds of the fault's step between the end of the warm-up and the fault (the second
  the fault falls in is partial and left out, as are seconds an earlier fault of the cluster disturbed:
  from its start through its recovery run, whose catch-up would inflate the mean, or to its step's end
  when its rate was not back). "Back" is the first run of ``BACK_SECONDS`` consecutive whole
  seconds after the fault, inside the step, each consuming ≥ ``BACK_SHARE`` × that mean (a backlog caught
  up above the mean counts); the recovery time runs from the fault's start to the start of that run.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SECOND_NS = 1_000_000_000
FAULT_BEFORE_S = 10.0
FAULT_AFTER_S = 10.0
BACK_SHARE = 0.95
BACK_SECONDS = 3


def fault_window(t_start_ns: int, t_back_end_ns: int | None, load_end_ns: int) -> tuple[int, int]:
    """``[lo, hi)`` in ns of the fault's window: FAULT_BEFORE_S before it to FAULT_AFTER_S after the node
    was back (or after the load ended, when the node stayed down)."""
    back = t_back_end_ns if t_back_end_ns is not None else max(load_end_ns, t_start_ns)
    return t_start_ns - int(FAULT_BEFORE_S * SECOND_NS), back + int(FAULT_AFTER_S * SECOND_NS)


@dataclass(frozen=True)
class Recovery:
    """How the consume rate came back after one fault; ``why`` says why a figure is null."""

    baseline: float | None          # pre-fault mean consume rate, msg/s
    baseline_seconds: int           # whole seconds it averages
    back: bool | None               # was the rate ever back (None: cannot be told, see why)
    back_s: float | None            # fault start → start of the first qualifying run of seconds
    back_at_ns: int | None          # that instant (a second boundary)
    lowest: float | None            # lowest whole-second consume rate from the fault to the end of that run (or the step)
    why: str | None = None


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def consume_recovery(consumed: Mapping[int, int], t0_ns: int, meas_start_ns: int | None, step_end_ns: int | None,
                     t_start_ns: int, disturbed: Iterable[tuple[int, int]] = ()) -> Recovery:
    """The recovery rule of the module docstring.

    ``consumed``: deliveries per second since ``t0_ns`` (a missing second consumed nothing);
    ``meas_start_ns``/``step_end_ns``: the measurement window of the step holding the fault (None: the
    fault is in no step); ``disturbed``: ``[start, end)`` ns of earlier faults of the cluster, kept out of
    the pre-fault mean."""
    if meas_start_ns is None or step_end_ns is None:
        return Recovery(None, 0, None, None, None, None, "the fault is outside every step window of its cluster")
    spans = list(disturbed)
    first = _ceil_div(meas_start_ns - t0_ns, SECOND_NS)
    stop = (t_start_ns - t0_ns) // SECOND_NS                 # the second the fault falls in: partial, left out
    base = [s for s in range(first, stop)
            if not any(t0_ns + s * SECOND_NS < b and t0_ns + (s + 1) * SECOND_NS > a for a, b in spans)]
    if not base:
        why = ("the fault came during its step's warm-up: no measured second before it" if t_start_ns < meas_start_ns
               else "no whole measured second of its step before the fault (outside earlier faults)")
        return Recovery(None, 0, None, None, None, None, why)
    baseline = sum(consumed.get(s, 0) for s in base) / len(base)
    after = list(range(_ceil_div(t_start_ns - t0_ns, SECOND_NS), (step_end_ns - t0_ns) // SECOND_NS))
    rates = [consumed.get(s, 0) for s in after]
    lowest_all = float(min(rates)) if rates else None
    if baseline <= 0:
        return Recovery(0.0, len(base), None, None, None, lowest_all, "nothing was consumed in the seconds before the fault")
    if len(after) < BACK_SECONDS:
        return Recovery(baseline, len(base), None, None, None, lowest_all,
                        f"fewer than {BACK_SECONDS} whole seconds between the fault and the end of its step")
    ok = [r >= BACK_SHARE * baseline for r in rates]
    for i in range(len(after) - BACK_SECONDS + 1):
        if all(ok[i:i + BACK_SECONDS]):
            at = t0_ns + after[i] * SECOND_NS
            return Recovery(baseline, len(base), True, (at - t_start_ns) / 1e9, at,
                            float(min(rates[:i + BACK_SECONDS])))
    return Recovery(baseline, len(base), False, None, None, lowest_all,
                    f"not back at ≥ {BACK_SHARE:.0%} of the pre-fault mean for {BACK_SECONDS} s in a row before its step ended")


def first_after(minima: Mapping[int, int], position: int) -> int | None:
    """The first ack confirm after the fault at ``position`` of the cluster's faults sorted by start:
    ``minima[j]`` is the earliest confirm between the start of sorted fault j and the next one's."""
    later = [t for j, t in minima.items() if j >= position]
    return min(later) if later else None
