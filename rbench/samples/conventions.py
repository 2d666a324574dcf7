"""Two reading conventions every output of rbench shares, defined once so they cannot drift apart.

* **Step numbers.** The Parquet ``step`` column, run.json and the machine-read files of a
  reduce (steps.parquet, leaderboard.json) keep the 0-based step index, because programs join
  on it. People read "step 1" for the first step everywhere (status line, end-of-run summary,
  report, plots, leaderboards, notes, steps.csv): a report saying "step 0" next to a status
  line that said "step 1" makes an engineer doubt which load a figure belongs to.
* **Stale deliveries.** A queue may still hold messages from an earlier run when a run
  starts, or from an earlier attempt of a Spark stage that was restarted after losing a task
  (the restarted attempt publishes with the same producer ids and sequence numbers, from a new
  t0); their stamps predate the cluster's t0 in run.json (the counted attempt's), so they are not
  this run's messages and must not show up as duplicates, reorders, hidden losses, inflated
  rates or huge latencies. They are counted (per cluster) and said so, never silently dropped.
"""
from __future__ import annotations

STEP_NUMBERING = ("steps are numbered from 1 in every printed output (step 1 = the first step); the Parquet "
                  "'step' column, run.json, steps.parquet and leaderboard.json keep the 0-based index (printed = index + 1)")
STALE_MEANING = ("stale = a delivery whose stamp (t_intended) predates its cluster's t0 in run.json, i.e. a message an "
                 "earlier run (or an earlier attempt of a restarted Spark stage) left in the queue; stale deliveries are "
                 "counted per cluster and excluded from every rate, latency, duplicate, reorder and loss figure")


def shown_step(step: int) -> int:
    """The step number people read for a 0-based step index (see the module docstring)."""
    return int(step) + 1


def stale_note(run_id: str, cluster: str, stale: int) -> str:
    """The report/CLI note for a cluster whose consumers received ``stale`` deliveries (an earlier run's or attempt's)."""
    return (f"{run_id}: cluster {cluster}: {stale:,} stale deliveries ignored (messages left in the queue by an earlier "
            f"run or stage attempt: their t_intended predates the cluster's t0; excluded from rates, latencies, "
            f"duplicates, reorders, losses)")
