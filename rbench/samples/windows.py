"""Each step's measurement window: the part of the step over which its rates and latencies are judged.

A rate is messages ÷ seconds, and both must cover the same load. The window of a step is its real
window [start, end) less three things the schedule itself asked for, so that none of them reads as a
broker that could not keep up (docs/reduce.md, "Measurement window"):

* the warm-up (``warmup_s`` from the step's start);
* the producers' start: until the last producer's first due send (PerfTest's random start delay of
  up to 1 s when a rate is given, ``publisher.random_start_delay``) part of the offered load is not
  due yet; the window starts at the later of the warm-up's end and that send;
* a message-count end (``-C``, ``message_count``): producers that started at different times stop
  at different times; the window ends at the first producer's stop, when the offered load begins to
  fall, instead of at the last producer's.

What is left is the span where every producer was due to send at its rate: the printed rate is the
rows sent in it divided by its length. ``note`` says in words why a window differs from
[start + warm-up, end), for the summary, the report and steps.csv.
"""
from __future__ import annotations

from dataclasses import replace

from rbench.samples.steps import StepRecord

# why a load ended (run.json ``stopped_by``): defined here, beside the windows it shapes (rbench.samples.runinfo
# imports it with the other reasons)
STOPPED_BY_COUNT = "message count reached"
SAID_FROM_NS = 5_000_000          # a window end this much before the load's is worth a sentence


def _s(ns: int) -> str:
    return f"{ns / 1e9:.2f} s"


def measure(step: StepRecord, warmup_s: float, producers_due_ns: int | None, producers_first_stop_ns: int | None,
            count_stop: bool) -> StepRecord:
    """``step`` with its measurement window set (unchanged when it never ran)."""
    if step.start_ns is None or step.end_ns is None:
        return replace(step, measure_start_ns=None, measure_end_ns=None, measure_note=None)
    start, end = step.start_ns, step.end_ns
    m_start, m_end = start + int(warmup_s * 1e9), end
    why = []
    if producers_due_ns is not None and producers_due_ns > m_start and producers_due_ns < end:
        why.append(f"starts {_s(producers_due_ns - start)} into the step, at the last producer's first due send "
                   f"(start delays excluded{' with the warm-up' if warmup_s else ''})")
        m_start = producers_due_ns
    if count_stop and producers_first_stop_ns is not None and start < producers_first_stop_ns < end:
        m_end = producers_first_stop_ns
    if m_end < end - SAID_FROM_NS:          # one producer: its stop is the load's end, give or take the drain's call
        why.append(f"ends {_s(end - m_end)} before the load did, when the first producer reached "
                   f"its message count (the others' tails excluded)")
    m_end = max(m_end, m_start)
    return replace(step, measure_start_ns=m_start, measure_end_ns=m_end, measure_note="; ".join(why) or None)


def cut_text(planned_s: float, ran_s: float, cut_by: str | None) -> str:
    """A cut step in words: a message-count run has no planned length to be cut from, only the one it ran."""
    if cut_by == STOPPED_BY_COUNT:
        return f"ran {ran_s:.1f} s, until every producer had sent its message count"
    return f"cut after {ran_s:.1f} s of its planned {planned_s:g} s ({cut_by}): its rates are over the {ran_s:.1f} s it ran"


def window_text(warmup_s: float) -> str:
    """How a step's measurement window is taken, for the summary's and the report's headings."""
    warm = f"the first {warmup_s:g} s (warm-up), " if warmup_s else ""
    return (f"measurement window = the step less {warm}the producers' start (until the last one's first due send) and, "
            f"with a message count, the tail after the first producer finished (run.json steps[].measure_start_ns/"
            f"measure_end_ns)")
