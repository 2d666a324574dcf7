"""Per-step statistics: achieved rates, exact latency percentiles, fault counts.

Definitions (also printed in the report, docs/reduce.md):

* measurement window of a step = ``[start_ns + warmup_s, end_ns)`` from run.json.
* *measured messages* of a step = rows tagged with that step whose ``t_intended`` lies in
  the measurement window. Latency percentiles and fault counts are over measured messages.
* achieved rates are wall-clock throughput: rows whose ``t_sent`` (publish),
  ``t_confirmed`` with outcome ack (confirm) or ``t_received`` (consume) falls inside the
  step's measurement window, of any step tag, divided by the window length in seconds.
  So a cluster that falls behind shows its real delivery rate, not the offered one.
* percentiles: exact, linear interpolation between the two closest ranks like numpy's
  default: rank error 0.
* *stale* deliveries: consumed rows whose ``t_intended`` predates the cluster's t0 (messages an
  earlier run left in the queue). Their step tag is meaningless (the recorder clips it to a real
  step) and their producer ids and sequence numbers collide with this run's, so they would show
  up as reorders, hide losses and inflate consume rates and timeline latencies: every figure
  excludes them and they are counted per (run, cluster) instead.

How it is computed (docs/reduce.md; nothing large leaves Spark):

1. *step latencies* (rbench.reduce.step_latencies): one Spark task per (run, cluster, side) reads
   the time columns of that cluster's part files with pyarrow and selects the needed ranks of each
   step with ``numpy.partition`` (every value of a step is in that one task: no shuffle, no sort).
2. *counting pass* (rbench.reduce.counting), one scan of each side: every row becomes a few
   ``(k, b, v)`` entries — ``k`` says what is counted and for which window / step / second, ``b`` a sub-key (outcome,
   latency bucket), ``v`` a latency — and one hash aggregation counts them per ``(k, b)`` with
   the max of ``v``. Window and step look-ups are ``CASE`` expressions built from run.json per
   (run, cluster) (rbench.reduce.plan), whose rows carry run_id and cluster as literals (load.py).
3. *fetch pass*: the rows of the few latency buckets holding a needed rank of a timeline second
   (the two-pass selection of rbench.reduce.percentiles).
4. *message pass* (rbench.reduce.messages, rbench.reduce.message_checks): published candidates
   for loss and every delivery, narrowed to integers, hash-partitioned by (run, cluster, producer), checked per partition with numpy
   (mapInArrow): reorders per (producer, queue) in receive order, duplicates and distinct
   messages per step, losses (a sort-merge membership test).

Small samples (``DRIVER_MAX_ROWS``) run the same passes on the driver, with pyarrow and numpy
(rbench.reduce.small) and the same functions downstream: no Spark job at all.

Faults (run.json ``faults``, rbench.reduce.faults) ride on the same passes, only for the clusters
that had one: the counting pass also counts ack confirms per second and the earliest confirm after
each fault, and the message pass also counts the same fates per fault window and over the whole run,
plus the messages in flight at a cut (outcome ``connection_lost``) and how many of them arrived.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from rbench.reduce.counting import (
    CONFRATE,
    CONRATE,
    DELIV,
    OUTCOME,
    PUBRATE,
    SEC_OFF,
    SHIFT,
    STALE,
    TLHIST,
    TLPUB,
    counting_pass,
    counts,
    latency_ranks,
)
from rbench.reduce.fault_counts import FaultCounts, fault_counts, run_faults
from rbench.reduce.message_checks import STEP_GROUP
from rbench.reduce.messages import message_pass
from rbench.reduce.metrics import COUNTS, METRICS, OUTCOME_COLS, PCT_NAMES, STEPS_SCHEMA, TIMELINE_SCHEMA, TL_PCTS
from rbench.reduce.plan import Plan
from rbench.reduce.small import DriverPasses
from rbench.reduce.step_latencies import latency_table, step_latencies
from rbench.samples.schema import OUTCOMES

# Up to this many sample rows (published + consumed, from the part files' footers), the reduce's passes
# run on the driver with pyarrow + numpy (rbench.reduce.small) and no Spark job: a 30 s run at
# 2 × 1,000 msg/s has 120,000 rows, and a cold session's first Spark SQL query, Parquet scan and Python
# worker cost seconds there (docs/timing.md). Driver memory: measured ~0.7 KB a row at the peak
# (tracemalloc), so ~0.4 GB at the threshold.
DRIVER_MAX_ROWS = 500_000


def on_driver(samples: Any) -> bool:
    """Whether the samples are small enough for the passes to run on the driver (rbench.reduce.small)."""
    rows = getattr(samples, "rows", None)
    return rows is not None and rows <= DRIVER_MAX_ROWS


def latency_percentiles(samples: Any) -> list[dict[str, Any]]:
    """Exact p50 p75 p95 p99 p99.9 and max (ms) of the latencies (LATENCIES) of measured messages, one dict per step
    of run.json (run_id, cluster, step, ``{e2e,e2e_sent,confirm,send_lag}_{p50,…,max}_ms``), in (run, cluster, step) order."""
    plan = Plan(samples.window_rows)
    lat = latency_table(plan, step_latencies(samples, plan, on_driver(samples)))
    rows = [{"run_id": r[0], "cluster": r[1], "step": r[2], **lat[gid]} for gid, r in enumerate(plan.rows)]
    return sorted(rows, key=lambda r: (r["run_id"], r["cluster"], r["step"]))


def _table(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.Table.from_arrays([pa.array(col, f.type) for col, f in zip(columns, schema, strict=True)], schema=schema)


def reduce_samples(samples: Any, mark: Callable[[str], None] | None = None
                   ) -> tuple[pa.Table, pa.Table, list[dict[str, Any]], FaultCounts | None]:
    """The per-step table (one row per (run, cluster, step) of run.json, every figure the report shows),
    the per-second timeline, as Arrow tables, per (run, cluster) the t0 and the count of stale
    deliveries every figure excluded, and what the passes measured for run.json's faults (None without
    any). Three passes; see the module docstring. ``mark`` is told the end of each."""
    mark = mark or (lambda what: None)
    plan = Plan(samples.window_rows, run_faults(samples))
    driver = on_driver(samples)
    if driver:                   # the same passes with numpy, no Spark job (rbench.reduce.small)
        passes = DriverPasses(samples, plan)
        mark(f"samples read on the driver ({samples.rows:,} rows)")
        hist = passes.counting()
        mark("counting pass (driver)")
        ranks = passes.timeline_ranks(hist) if hist is not None else {}
        mark("fetch pass (timeline percentiles, driver)")
        msgs = passes.messages()
        mark("message pass (lost, duplicated, reordered; driver)")
    else:
        hist = counting_pass(samples, plan, "all")
        mark("counting pass")
        ranks = latency_ranks(samples, plan, "tl", hist, {TLHIST: TL_PCTS}) if hist is not None else {}
        mark("fetch pass (timeline percentiles)")
        msgs = message_pass(samples, plan)
        mark("message pass (lost, duplicated, reordered)")
    lat = latency_table(plan, step_latencies(samples, plan, driver))
    mark("step latencies (exact percentiles)")
    cnt = {kind: counts(hist, kind) if hist is not None else {}
           for kind in (PUBRATE, CONFRATE, OUTCOME, CONRATE, DELIV, TLPUB, TLHIST, STALE)}
    stale = [{"run_id": run_id, "cluster": cluster, "t0_ns": plan.t0[rc], "stale": cnt[STALE].get((rc, 0), 0)}
             for (run_id, cluster), rc in sorted(plan.rc.items())]
    faults = fault_counts(plan, hist, msgs) if plan.faults else None
    return _steps_table(plan, cnt, msgs, lat), _timeline_table(plan, cnt, ranks), stale, faults


def _steps_table(plan: Plan, cnt: dict[int, dict[tuple[int, int], int]], msgs: dict[tuple[int, int], dict[str, int]],
                 lat: dict[int, dict[str, Any]]) -> pa.Table:
    """One row per step window of run.json (STEPS_SCHEMA), in (run, cluster, step) order."""
    rows = []
    for gid, w in enumerate(plan.rows):
        run_id, cluster, step, target, start, end, meas, window_s, warmup_s, _t0 = w
        outc = [cnt[OUTCOME].get((gid, i), 0) for i in range(len(OUTCOMES) + 1)]
        m = msgs.get((STEP_GROUP, gid), {})
        c = {"published_in_window": cnt[PUBRATE].get((gid, 0), 0), "confirmed_in_window": cnt[CONFRATE].get((gid, 0), 0),
             "consumed_in_window": cnt[CONRATE].get((gid, 0), 0), "published": sum(outc),
             **{col: outc[i] for i, col in enumerate(OUTCOME_COLS)},
             "deliveries": cnt[DELIV].get((gid, 0), 0) + cnt[DELIV].get((gid, 1), 0), "redelivered": cnt[DELIV].get((gid, 1), 0),
             "reordered": m.get("reordered", 0), "consumed_unique": m.get("consumed_unique", 0),
             "duplicated": m.get("duplicated", 0), "lost": m.get("lost", 0), "expected": m.get("expected", 0)}
        rates = [c[k] / window_s if window_s > 0 else None
                 for k in ("published_in_window", "confirmed_in_window", "consumed_in_window")]
        rows.append((run_id, cluster, step, target, window_s, warmup_s, start, end, meas, *[c[k] for k in COUNTS],
                     *[lat[gid][f"{mt}_{n}_ms"] for mt in METRICS for n in [*PCT_NAMES, "max"]], *rates))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return _table(rows, STEPS_SCHEMA)


def _timeline_table(plan: Plan, cnt: dict[int, dict[tuple[int, int], int]], ranks: dict[int, dict[str, Any]]) -> pa.Table:
    """One row per (run, cluster, second since its t0) with a publish or a delivery (TIMELINE_SCHEMA)."""
    names = {rc: key for key, rc in plan.rc.items()}
    tl: dict[tuple[int, int], list[Any]] = {}
    for (rc, sec), n in cnt[TLPUB].items():
        tl.setdefault((rc, sec), [0, 0, None, None, None])[0] += n
    for (ident, _b), n in cnt[TLHIST].items():
        tl.setdefault((ident >> 32, (ident & 0xFFFFFFFF) - SEC_OFF), [0, 0, None, None, None])[1] += n
    for k, r in ranks.items():
        if k >> SHIFT == TLHIST:
            ident = k & ((1 << SHIFT) - 1)
            tl[(ident >> 32, (ident & 0xFFFFFFFF) - SEC_OFF)][2:] = [r["q"][0] / 1e6, r["q"][1] / 1e6, r["vmax"] / 1e6]
    tl_rows = sorted(((*names[rc], sec, *vals) for (rc, sec), vals in tl.items()), key=lambda r: (r[0], r[1], r[2]))
    return _table(tl_rows, TIMELINE_SCHEMA)
