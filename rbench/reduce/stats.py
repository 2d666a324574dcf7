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
   (mapInArrow): reorders per (producer, queue, consumer) in receive order, duplicates and distinct
   messages per step, losses (a sort-merge membership test).

Samples whose largest cluster fits the driver's memory budget (``on_driver``) run the same passes on the
driver, a cluster at a time, with pyarrow and numpy (rbench.reduce.small) and the same functions
downstream: no Spark job at all.

Faults (run.json ``faults``, rbench.reduce.faults) ride on the same passes, only for the clusters
that had one: the counting pass also counts ack confirms per second and the earliest confirm after
each fault, and the message pass also counts the same fates per fault window and over the whole run,
plus the messages in flight at a cut (outcome ``connection_lost``) and how many of them arrived.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from rbench.errors import ConfigError
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
from rbench.reduce.message_checks import STEP_GROUP, WHOLE_GROUP
from rbench.reduce.messages import message_pass
from rbench.reduce.metrics import COUNTS, METRICS, OUTCOME_COLS, PCT_NAMES, STEPS_SCHEMA, TIMELINE_SCHEMA, TL_PCTS
from rbench.reduce.plan import Plan
from rbench.reduce.rereads import whole_run
from rbench.reduce.small import DriverPasses
from rbench.reduce.step_latencies import latency_table, step_latencies
from rbench.samples.schema import OUTCOMES

# Where the passes run (docs/reduce.md "Where the passes run"). On the driver (rbench.reduce.small) they
# read one (run, cluster) at a time, so what must fit is the largest cluster's rows (published + consumed)
# × DRIVER_BYTES_PER_ROW, the driver's peak memory a row: the slope of `rbench reduce`'s peak RSS (/usr/bin/time -v)
# between two runs of `rbench perftest -x 1 -y 1 -a` reduced on the driver, 2.14M rows (0.79 GiB peak, twice) and 6.52M
# rows (2.02 GiB, three times): 300 bytes a row above a ~200 MiB process; 330 keeps a tenth in hand. (It was 450, measured
# before the driver passes were rewritten: reduce/message_rows.py, reduce/row_keys.py.) The budget is explicit:
# RBENCH_REDUCE_DRIVER_MEMORY (bytes, or with k/m/g; 0 = always Spark), else half of the memory available when the
# reduce starts (/proc/meminfo MemAvailable). On a cluster whose driver is small, set it to what the driver may use.
DRIVER_BYTES_PER_ROW = 330
DRIVER_MEMORY_ENV = "RBENCH_REDUCE_DRIVER_MEMORY"


def driver_budget() -> int:
    """Bytes the driver's passes may use: RBENCH_REDUCE_DRIVER_MEMORY, else half of MemAvailable (0 when unknown)."""
    import os

    text = os.environ.get(DRIVER_MEMORY_ENV, "").strip().lower()
    if text:
        units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
        number, scale = (text[:-1], units[text[-1]]) if text[-1] in units else (text, 1)
        try:
            value = int(float(number) * scale)
        except ValueError:
            raise ConfigError(f"{DRIVER_MEMORY_ENV}: expected bytes (e.g. 2g, 512m, 0), got {text!r}") from None
        if value < 0:
            raise ConfigError(f"{DRIVER_MEMORY_ENV}: expected bytes >= 0, got {text!r}")
        return value
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return 0


def on_driver(samples: Any) -> bool:
    """Whether the passes run on the driver (rbench.reduce.small): the largest (run, cluster)'s rows fit its budget."""
    sizes = getattr(samples, "cluster_rows", None)
    if getattr(samples, "rows", None) is None or sizes is None:
        return False
    return max(sizes.values(), default=0) * DRIVER_BYTES_PER_ROW <= driver_budget()


def latency_percentiles(samples: Any) -> list[dict[str, Any]]:
    """Exact p50 p75 p95 p99 p99.9 and max (ms) of the latencies (LATENCIES) of measured messages, one dict per step
    of run.json (run_id, cluster, step, ``{e2e,e2e_sent,confirm,send_lag}_{p50,…,max}_ms``), in (run, cluster, step) order."""
    plan = Plan(samples.window_rows)
    lat = latency_table(plan, step_latencies(samples, plan, on_driver(samples)))
    rows = [{"run_id": r.run_id, "cluster": r.cluster, "step": r.step, **lat[gid]} for gid, r in enumerate(plan.rows)]
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
    if on_driver(samples):       # the same passes with numpy, a cluster at a time, no Spark job (rbench.reduce.small)
        done = DriverPasses(samples, plan).run(mark)
        hist, ranks, msgs, lat = done.hist, done.ranks, done.msgs, latency_table(plan, done.latencies)
    else:
        hist = counting_pass(samples, plan, "all")
        mark("counting pass")
        ranks = latency_ranks(samples, plan, "tl", hist, {TLHIST: TL_PCTS}) if hist is not None else {}
        mark("fetch pass (timeline percentiles)")
        msgs = message_pass(samples, plan)
        mark("message pass (lost, duplicated, reordered)")
        lat = latency_table(plan, step_latencies(samples, plan, False))
        mark("step latencies (exact percentiles)")
    cnt = {kind: counts(hist, kind) if hist is not None else {}
           for kind in (PUBRATE, CONFRATE, OUTCOME, CONRATE, DELIV, TLPUB, TLHIST, STALE)}
    stale = [{"run_id": run_id, "cluster": cluster, "t0_ns": plan.t0[rc], "stale": cnt[STALE].get((rc, 0), 0),
              **whole_run(msgs.get((WHOLE_GROUP, rc), {}))}
             for (run_id, cluster), rc in sorted(plan.rc.items())]
    faults = fault_counts(plan, hist, msgs) if plan.faults else None
    return _steps_table(plan, cnt, msgs, lat), _timeline_table(plan, cnt, ranks), stale, faults


def _steps_table(plan: Plan, cnt: dict[int, dict[tuple[int, int], int]], msgs: dict[tuple[int, int], dict[str, int]],
                 lat: dict[int, dict[str, Any]]) -> pa.Table:
    """One row per step window of run.json (STEPS_SCHEMA), in (run, cluster, step) order."""
    rows = []
    for gid, w in enumerate(plan.rows):
        run_id, cluster, step, target, start, window_s, warmup_s = w.run_id, w.cluster, w.step, w.target_rate, \
            w.start_ns, w.window_s, w.warmup_s
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
        rows.append((run_id, cluster, step, target, window_s, warmup_s, start, w.step_end_ns, w.meas_start_ns,
                     w.end_ns, *[c[k] for k in COUNTS],
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
