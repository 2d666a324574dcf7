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

1. *step latencies*: one Spark task per (run, cluster, side) reads the time columns of that
   cluster's part files with pyarrow and selects the needed ranks of each step with
   ``numpy.partition`` (every value of a step is in that one task: no shuffle, no sort).
2. *counting pass*, one scan of each side: every row becomes a few ``(k, b, v)`` entries —
   ``k`` says what is counted and for which window / step / second, ``b`` a sub-key (outcome,
   latency bucket), ``v`` a latency — and one hash aggregation counts them per ``(k, b)`` with
   the max of ``v``. Window and step look-ups are ``CASE`` expressions built from run.json per
   (run, cluster), whose rows carry run_id and cluster as literals (load.py).
3. *fetch pass*: the rows of the few latency buckets holding a needed rank of a timeline second
   (the two-pass selection of rbench.reduce.percentiles).
4. *message pass*: published candidates for loss and every delivery, narrowed to integers,
   hash-partitioned by (run, cluster, producer), checked per partition with numpy
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

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rbench.reduce.percentiles import bucket_of, finish_ranks, plan_ranks
from rbench.reduce.recovery import fault_window, first_after
from rbench.samples.faults import FaultRecord
from rbench.samples.schema import CONNECTION_LOST, MAY_BE_LOST, OUTCOMES

PERCENTILES: tuple[float, ...] = (0.5, 0.75, 0.95, 0.99, 0.999)
PCT_NAMES: tuple[str, ...] = ("p50", "p75", "p95", "p99", "p999")
LATENCIES: dict[str, str] = {
    "e2e": "end-to-end latency from intended send time: t_received - t_intended",
    "e2e_sent": "end-to-end latency from actual send time: t_received - t_sent",
    "confirm": "publisher-confirm latency: t_confirmed - t_sent (outcomes with a confirm)",
    "send_lag": "send lateness of the generator: t_sent - t_intended (how much of the end-to-end latency is the "
                "load generator's own; 0 for unlimited rate, where t_intended = t_sent)",
}
PERCENTILE_METHOD = ("exact over every measured message: linear interpolation between the two closest ranks "
                     "(numpy 'linear', Spark percentile(), DuckDB quantile_cont), selected with numpy.partition in one "
                     "Spark task per cluster (rbench.reduce.stats.step_latencies); rank error 0")
KEY = ["run_id", "cluster", "step"]
OUTCOME_COLS = ("acked", "nacked", "returned", "timeout", "unconfirmed", "connection_lost")   # steps columns, one per OUTCOMES entry
assert len(OUTCOME_COLS) == len(OUTCOMES)
METRICS = tuple(LATENCIES)                     # e2e, e2e_sent, confirm, send_lag: index into ranks[(gid, index)]
TL_PCTS: tuple[float, ...] = (0.5, 0.99)

# kinds of counting-pass entries: k = kind << 48 | id
PUBRATE, CONFRATE, OUTCOME, HIST, TLPUB, CONRATE, DELIV, TLHIST, STALE, TLCONF, FIRSTCONF = range(1, 12)
MAX_FAULTS = 62                                # fault windows of one cluster a message can be in (bits of a long)
_SHIFT = 48
_SEC_OFF = 1 << 31                             # TLHIST id = rc << 32 | (second + 2^31)
NO_LAT = -(1 << 62)


class Plan:
    """Integer ids for the windows of run.json (gid = row index) and the (run, cluster) pairs (rc)."""

    def __init__(self, window_rows: list[tuple[Any, ...]], faults: list[tuple[str, FaultRecord]] | None = None) -> None:
        """``faults``: (run_id, fault) of every fault of run.json, in (run, cluster, index) order."""
        self.rows = window_rows
        self.rc: dict[tuple[str, str], int] = {}
        self.t0: dict[int, int] = {}
        self.by_rc: dict[int, list[tuple[int, int, int, int]]] = {}     # rc -> [(gid, step, meas, end)]
        for gid, r in enumerate(window_rows):
            rc = self.rc.setdefault((r[0], r[1]), len(self.rc))
            self.t0[rc] = min(self.t0.get(rc, r[9]), r[9])
            self.by_rc.setdefault(rc, []).append((gid, r[2], r[6], r[5]))
        # rc -> its faults in bit order (the cluster's first MAX_FAULTS by index) with their windows [lo, hi)
        self.faults: dict[int, list[tuple[FaultRecord, int, int]]] = {}
        for run_id, f in faults or []:
            frc = self.rc.get((run_id, f.cluster))
            if frc is not None and len(self.faults.get(frc, [])) < MAX_FAULTS:
                lo, hi = fault_window(f.t_start_ns, f.t_back_end_ns, self.load_end(frc))
                self.faults.setdefault(frc, []).append((f, lo, hi))

    def load_end(self, rc: int) -> int:
        """End of the cluster's last step window (where its load stopped)."""
        return max(e for *_, e in self.by_rc[rc])

    def fault_mask(self, rc: int) -> Column:
        """Bit i set when the row's ``t_sent`` is in the window of the cluster's i-th fault (0: in none)."""
        t = F.col("t_sent")
        out: Column = F.lit(0).cast("long")
        for bit, (_, lo, hi) in enumerate(self.faults.get(rc, [])):
            out = out + F.when((t >= lo) & (t < hi), F.lit(1 << bit)).otherwise(F.lit(0)).cast("long")
        return out

    def after_fault(self, rc: int, t: Column) -> Column:
        """Position, among the cluster's faults in the order they took effect (``t_end_ns``: the action done, the
        node down), of the last fault in effect before ``t``."""
        starts = self.fault_starts(rc)
        return _case([(t > s, i) for i, s in reversed(list(enumerate(starts)))])

    def rc_of(self, run_id: str, cluster: str) -> int | None:
        return self.rc.get((run_id, cluster))

    def gid_tagged(self, rc: int) -> Column:
        """gid of the row's step window (null: the step has no window)."""
        return _case([(F.col("step") == s, gid) for gid, s, _, _ in self.by_rc.get(rc, [])])

    def gid_measured(self, rc: int) -> Column:
        """gid when the row is a measured message of its step, else null."""
        ti = F.col("t_intended")
        return _case([((F.col("step") == s) & (ti >= m) & (ti < e), gid) for gid, s, m, e in self.by_rc.get(rc, [])])

    def layers(self, rc: int) -> list[list[tuple[int, int, int]]]:
        """The cluster's measurement windows (gid, start, end) in layers of non-overlapping windows (one layer
        unless run.json has overlapping steps), so a time in two windows counts in both."""
        layers: list[list[tuple[int, int, int]]] = []
        for gid, _, m, e in sorted(self.by_rc.get(rc, []), key=lambda w: w[2]):
            for layer in layers:
                if layer[-1][2] <= m:
                    layer.append((gid, m, e))
                    break
            else:
                layers.append([(gid, m, e)])
        return layers

    def fault_starts(self, rc: int) -> list[int]:
        """When each of the cluster's faults took effect (``t_end_ns``), in that order."""
        return sorted(f.t_end_ns for f, _, _ in self.faults.get(rc, []))

    def windows_of(self, rc: int, t: Column) -> list[Column]:
        """gid of the measurement window holding ``t``: one expression per layer (``layers``)."""
        return [_case([((t >= m) & (t < e), gid) for gid, m, e in layer]) for layer in self.layers(rc)]

    def fresh(self, rc: int) -> Column:
        """True for a consumed row of this run; false for a stale one (``t_intended`` before the cluster's t0)."""
        return F.coalesce(F.col("t_intended") >= F.lit(self.t0[rc]), F.lit(True))

    def second(self, rc: int, t: str) -> Column:
        return F.floor((F.col(t) - F.lit(self.t0[rc])) / 1e9).cast("long")


def _case(pairs: list[tuple[Column, int]]) -> Column:
    out = None
    for cond, val in pairs:
        out = F.when(cond, F.lit(val)) if out is None else out.when(cond, F.lit(val))
    return (out if out is not None else F.lit(None)).cast("long")


def _entry(kind: int, ident: Column, b: Column, v: Column | None = None) -> Column:
    return F.struct((F.lit(kind << _SHIFT) + ident).alias("k"), b.cast("long").alias("b"),
                    (v if v is not None else F.lit(None)).cast("long").alias("v"))


def _published_entries(plan: Plan, rc: int, what: str) -> list[Column]:
    gm = plan.gid_measured(rc)
    oc = F.col("outcome")
    code = _case([(oc == name, i) for i, name in enumerate(OUTCOMES)])
    out = [_entry(PUBRATE, w, F.lit(0)) for w in plan.windows_of(rc, F.col("t_sent"))]
    out += [_entry(CONFRATE, F.when(oc == "ack", w), F.lit(0)) for w in plan.windows_of(rc, F.col("t_confirmed"))]
    out += [_entry(OUTCOME, gm, F.coalesce(code, F.lit(len(OUTCOMES)))),
            _entry(TLPUB, F.lit(rc), plan.second(rc, "t_sent"))]
    if rc in plan.faults:      # confirms per second, and the earliest confirm after each fault (max of −t)
        ack = F.when(oc == "ack", F.lit(rc))
        out += [_entry(TLCONF, ack, plan.second(rc, "t_confirmed")),
                _entry(FIRSTCONF, ack, plan.after_fault(rc, F.col("t_confirmed")), -F.col("t_confirmed"))]
    return out


def _consumed_entries(plan: Plan, rc: int, what: str) -> list[Column]:
    fresh = plan.fresh(rc)                      # a stale row yields only its STALE entry (null k elsewhere)
    gm = F.when(fresh, plan.gid_measured(rc))
    e2e = F.col("t_received") - F.col("t_intended")
    tl = F.when(fresh, F.lit(rc << 32) + plan.second(rc, "t_received") + F.lit(_SEC_OFF))
    # the timeline: per second, latency buckets (+ one entry with b = NO_LAT for a row without latency)
    out = [_entry(TLHIST, tl, bucket_of(e2e), e2e)]
    if what != "all":
        return out
    out += [_entry(CONRATE, F.when(fresh, w), F.lit(0)) for w in plan.windows_of(rc, F.col("t_received"))]
    out += [_entry(DELIV, gm, F.coalesce(F.col("redelivered").cast("int"), F.lit(0))),
            _entry(TLHIST, tl, F.when(e2e.isNull(), F.lit(NO_LAT))),
            _entry(STALE, F.when(~fresh, F.lit(rc)), F.lit(0))]
    return out


def entries(samples: Any, plan: Plan, what: str) -> DataFrame | None:
    """The (k, b, v) entries of every row of both sides (null k or b dropped). ``what``: "all" (counting
    pass) or "tl" (consumed only, per-second latencies: the fetch pass)."""
    frames = []
    sides = [(samples.con_branches, _consumed_entries)]
    if what == "all":
        sides.insert(0, (samples.pub_branches, _published_entries))
    for side, builder in sides:
        for run_id, cluster, df in side:
            rc = plan.rc_of(run_id, cluster)
            if rc is None:          # no step of this cluster has a window: nothing is measured or plotted
                continue
            e = df.select(F.inline(F.array(*builder(plan, rc, what))))
            frames.append(e.where(F.col("k").isNotNull() & F.col("b").isNotNull()))
    if not frames:
        return None
    out: DataFrame = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def counting_pass(samples: Any, plan: Plan, what: str) -> pa.Table | None:
    """Pass 1: count of every (k, b) and the max of its v (a few hundred thousand rows at most)."""
    ent = entries(samples, plan, what)
    if ent is None:
        return None
    return ent.groupBy("k", "b").agg(F.count(F.lit(1)).alias("c"), F.max("v").alias("bmax")).toArrow()


def latency_ranks(samples: Any, plan: Plan, what: str, hist: pa.Table, percentiles_by_kind: dict[int, tuple[float, ...]]
                  ) -> dict[int, dict[str, Any]]:
    """Exact percentiles of every latency group of the histogram (two-pass selection, percentiles.py)."""
    k = hist.column("k").to_numpy()
    b = hist.column("b").to_numpy()
    c = hist.column("c").to_numpy()
    m = hist.column("bmax").fill_null(0).to_numpy()
    groups: dict[int, dict[str, Any]] = {}
    fetch: set[tuple[int, int]] = set()
    for kind, pcts in percentiles_by_kind.items():
        sel = ((k >> _SHIFT) == kind) & (b != NO_LAT)
        g, f = plan_ranks(k[sel], b[sel], c[sel], m[sel], pcts)
        groups.update(g)
        fetch |= f
    if not groups:
        return {}
    spark = samples.spark
    wanted = spark.createDataFrame(sorted(fetch), "k long, b long")
    ent = entries(samples, plan, what)
    assert ent is not None
    picked = ent.join(F.broadcast(wanted), on=["k", "b"], how="left_semi").select("k", "b", "v").toArrow()
    return finish_ranks(groups, picked.column("k").to_numpy(), picked.column("b").to_numpy(), picked.column("v").to_numpy())


def _counts(hist: pa.Table, kind: int) -> dict[tuple[int, int], int]:
    k = hist.column("k").to_numpy()
    sel = (k >> _SHIFT) == kind
    ids = (k[sel] & ((1 << _SHIFT) - 1)).tolist()
    return dict(zip(zip(ids, hist.column("b").to_numpy()[sel].tolist()), hist.column("c").to_numpy()[sel].tolist()))


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


def step_latencies(samples: Any, plan: Plan) -> dict[tuple[int, int], dict[str, Any]]:
    """Exact percentiles of the latencies (LATENCIES) of every step: one Spark task per (run, cluster, side) reads
    that cluster's part files (only the time columns) with pyarrow and selects the ranks with numpy
    (``np.partition``), so a step's values are in one worker and nothing is shuffled or sorted."""
    units = []
    for kind, run_id, cluster, files in samples.parts:
        rc = plan.rc_of(run_id, cluster)
        if rc is not None and files:
            units.append((kind, files, plan.by_rc[rc], PERCENTILES, plan.t0[rc]))
    if not units:
        return {}
    if on_driver(samples):          # the same function, without a Spark job and its Python workers
        parts = [_unit_latencies(u) for u in units]
    else:
        sc = samples.spark.sparkContext
        parts = sc.parallelize(units, len(units)).map(_unit_latencies).collect()
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for part in parts:
        out.update(part)
    return out


def _unit_latencies(unit: tuple[str, list[str], list[tuple[int, int, int, int]], tuple[float, ...], int]
                    ) -> dict[tuple[int, int], dict[str, Any]]:
    import math

    import pyarrow.parquet as pq

    kind, files, wins, pcts, t0 = unit
    if kind == "consumed":
        cols, metrics = ["step", "t_intended", "t_sent", "t_received"], [(0, "t_received", "t_intended"), (1, "t_received", "t_sent")]
    else:
        cols, metrics = ["step", "t_intended", "t_sent", "t_confirmed"], [(2, "t_confirmed", "t_sent"), (3, "t_sent", "t_intended")]
    tbl = pq.read_table(files, columns=cols)
    arr = {c: tbl.column(c).fill_null(0).to_numpy() for c in cols}
    ok = {c: ~tbl.column(c).is_null().to_numpy(zero_copy_only=False) if tbl.column(c).null_count else None for c in cols}
    res: dict[tuple[int, int], dict[str, Any]] = {}
    step, ti = arr["step"], arr["t_intended"]
    base = np.ones(tbl.num_rows, dtype=bool)
    for c in ("step", "t_intended"):
        if ok[c] is not None:
            base &= ok[c]
    base &= ti >= t0            # stale rows (an earlier run's): measurement windows start after t0 anyway
    for gid, s, m, e in wins:
        meas = base & (step == s) & (ti >= m) & (ti < e)
        for mi, a, b in metrics:
            sel = meas
            for c in (a, b):
                if ok[c] is not None:
                    sel = sel & ok[c]
            v = arr[a][sel] - arr[b][sel]
            if not v.size:
                continue
            n = v.size
            plan = []
            for p in pcts:
                h = (n - 1) * p
                r0 = math.floor(h)
                plan.append((r0, min(r0 + 1, n - 1), h - r0))
            kth = sorted({r for r0, r1, _ in plan for r in (r0, r1)})
            part = np.partition(v, kth)
            qs = []
            for r0, r1, frac in plan:
                x0, x1 = int(part[r0]), int(part[r1])
                qs.append(x0 + frac * (x1 - x0))
            res[(gid, mi)] = {"n": n, "vmax": int(v.max()), "q": qs}
    return res


def latency_table(samples: Any, plan: Plan, ranks: dict[tuple[int, int], dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """gid → {e2e_p50_ms, …, confirm_max_ms} (nulls for a latency without values)."""
    out: dict[int, dict[str, Any]] = {}
    for gid in range(len(plan.rows)):
        row: dict[str, Any] = {}
        for mi, metric in enumerate(METRICS):
            r = ranks.get((gid, mi))
            for i, name in enumerate(PCT_NAMES):
                row[f"{metric}_{name}_ms"] = None if r is None else r["q"][i] / 1e6
            row[f"{metric}_max_ms"] = None if r is None else r["vmax"] / 1e6
        out[gid] = row
    return out


def latency_percentiles(samples: Any) -> list[dict[str, Any]]:
    """Exact p50 p75 p95 p99 p99.9 and max (ms) of the latencies (LATENCIES) of measured messages, one dict per step
    of run.json (run_id, cluster, step, ``{e2e,e2e_sent,confirm,send_lag}_{p50,…,max}_ms``), in (run, cluster, step) order."""
    plan = Plan(samples.window_rows)
    lat = latency_table(samples, plan, step_latencies(samples, plan))
    rows = [{"run_id": r[0], "cluster": r[1], "step": r[2], **lat[gid]} for gid, r in enumerate(plan.rows)]
    return sorted(rows, key=lambda r: (r["run_id"], r["cluster"], r["step"]))


# --- the message pass: reorders, duplicates, losses ---

MSG_COUNTS = ("reordered", "consumed_unique", "duplicated", "lost", "expected",
              "connection_lost", "connection_lost_consumed", "redelivered")
STEP_GROUP, RUN_GROUP, FAULT_GROUP = 0, 1, 2   # what a message-pass count is of: a step (gid), a run's cluster (rc), a fault
MSG_SCHEMA = T.StructType([T.StructField("kind", T.ByteType()), T.StructField("gid", T.LongType()),
                           *[T.StructField(c, T.LongType()) for c in MSG_COUNTS]])
_MSG_ARROW = pa.schema([("kind", pa.int8()), ("gid", pa.int64()), *[(c, pa.int64()) for c in MSG_COUNTS]])
DELIVERY, CANDIDATE, CUT = 1, 0, 2             # src of a message-pass row: a delivery, an expected copy, a connection_lost message


def routes_of(samples: Any) -> dict[str, dict[int, list[str]]]:
    """run_id → producer → the queues each of its messages is routed to (run.json ``routes``; fan-out lists
    several). A run without routes (older runs, or routing rbench cannot know) expects one copy in any queue."""
    out: dict[str, dict[int, list[str]]] = {}
    for run in samples.runs:
        if run.record.routes:
            out[run.run_id] = {p: list(qs) for p, qs in run.record.routes.items()}
    return out


def _expected_queue(routes: dict[int, list[str]] | None) -> Column:
    """One row per copy the broker should deliver: the published row exploded over its producer's queues
    (a null queue, matched against any queue, when the routes are unknown)."""
    if not routes:
        return F.lit(None).cast("string").alias("queue")
    pairs = [x for p, qs in sorted(routes.items()) for x in (F.lit(p), F.array(*[F.lit(q) for q in qs]))]
    return F.explode_outer(F.create_map(*pairs)[F.col("producer")]).alias("queue")


def message_pass(samples: Any, plan: Plan) -> dict[tuple[int, int], dict[str, int]]:
    """(STEP_GROUP, gid) / (RUN_GROUP, rc) / (FAULT_GROUP, rc × 64 + fault bit) → the counts of MSG_COUNTS.

    Steps count their measured messages. A cluster with faults also gets, over every message of its run
    (warm-ups included) and over each fault window (messages by ``t_sent``), the same figures plus the
    ``connection_lost`` messages and how many of them a consumer received. Without any fault the rows
    and columns shuffled are exactly those of the step figures."""
    routes = routes_of(samples)
    with_faults = bool(plan.faults)

    def fault_cols(rc: int | None, red: Column) -> list[Column]:
        if not with_faults:
            return []
        return [(plan.fault_mask(rc) if rc is not None else F.lit(0).cast("long")).alias("fm"), red.cast("boolean").alias("red")]

    frames = []
    for run_id, cluster, df in samples.con_branches:
        rc = plan.rc_of(run_id, cluster)
        if rc is not None:
            df = df.where(plan.fresh(rc))        # stale rows would be reorders and hide losses
        frames.append(df.select(F.lit(DELIVERY).cast("byte").alias("src"), F.lit(-1 if rc is None else rc).alias("rc"),
                                "producer", "queue", "seq", F.col("t_received").alias("t"),
                                (plan.gid_tagged(rc) if rc is not None else F.lit(None).cast("long")).alias("gt"),
                                (plan.gid_measured(rc) if rc is not None else F.lit(None).cast("long")).alias("gm"),
                                *fault_cols(rc, F.col("redelivered"))))
    for run_id, cluster, df in samples.pub_branches:
        rc = plan.rc_of(run_id, cluster)
        if rc is None:
            continue
        gm = plan.gid_measured(rc)
        # a faulted cluster's run figures need every message whose step has a window, not only measured ones
        keep = plan.gid_tagged(rc).isNotNull() if rc in plan.faults else gm.isNotNull()
        nulls = [F.lit(None).cast("long").alias("t"), F.lit(None).cast("long").alias("gt"), gm.alias("gm")]
        pub = df.where(F.col("outcome").isin(*MAY_BE_LOST) & keep).select(
            F.lit(CANDIDATE).cast("byte").alias("src"), F.lit(rc).alias("rc"), "producer", _expected_queue(routes.get(run_id)),
            "seq", *nulls, *fault_cols(rc, F.lit(None)))
        frames.append(pub)
        if rc in plan.faults:                    # in flight at a cut: matched against a delivery on any queue
            frames.append(df.where((F.col("outcome") == OUTCOMES[CONNECTION_LOST]) & keep).select(
                F.lit(CUT).cast("byte").alias("src"), F.lit(rc).alias("rc"), "producer",
                F.lit(None).cast("string").alias("queue"), "seq", *nulls, *fault_cols(rc, F.lit(None))))
    if not frames:
        return {}
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    check = partial(_check_messages, frozenset(plan.faults))
    n = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    res = df.repartition(n, "rc", "producer").mapInArrow(check, MSG_SCHEMA).toArrow()
    out: dict[tuple[int, int], dict[str, int]] = {}
    for r in res.to_pylist():
        d = out.setdefault((r["kind"], r["gid"]), {c: 0 for c in MSG_COUNTS})
        for key in d:
            d[key] += r[key]
    return out


def _groups_of(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort order of rows by ``cols`` (first = primary) and the group number of each sorted row."""
    order = np.lexsort(tuple(reversed(cols)))
    if order.size == 0:
        return order, order
    change = np.zeros(order.size, dtype=bool)
    for c in cols:
        s = c[order]
        change[1:] |= s[1:] != s[:-1]
    return order, np.cumsum(change)


def _check_messages(faulted: frozenset[int], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One hash partition (all rows of some (rc, producer)): per gid reorders, distinct, duplicated, lost;
    for the clusters in ``faulted`` the same (and the cut messages) per run and per fault window."""
    got = [b for b in batches if b.num_rows]
    if not got:
        return
    tbl = pa.Table.from_batches(got)
    src = tbl.column("src").to_numpy()
    rc = tbl.column("rc").to_numpy().astype(np.int64)
    prod = tbl.column("producer").to_numpy(zero_copy_only=False).astype(np.int64)
    seq = tbl.column("seq").to_numpy(zero_copy_only=False)
    gt = tbl.column("gt").fill_null(-1).to_numpy()
    gm = tbl.column("gm").fill_null(-1).to_numpy()
    # queue codes shared by deliveries and expected copies (-1: a published row whose routes are unknown)
    qall = tbl.column("queue").dictionary_encode().combine_chunks()
    qcodes = np.where(qall.is_null().to_numpy(zero_copy_only=False), -1,
                      qall.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64))
    # fault columns exist only when some cluster had a fault; a row counts for its run when its cluster did
    fm = tbl.column("fm").to_numpy() if "fm" in tbl.column_names else np.zeros(tbl.num_rows, dtype=np.int64)
    red = (tbl.column("red").fill_null(False).to_numpy(zero_copy_only=False) if "red" in tbl.column_names
           else np.zeros(tbl.num_rows, dtype=bool))
    in_run = np.isin(rc, np.array(sorted(faulted), dtype=np.int64)) & ((src != DELIVERY) | (gt >= 0))
    acc: dict[tuple[int, int], list[int]] = {}

    def add_ids(kind: int, col: int, ids_: np.ndarray) -> None:
        ids, cnt = np.unique(ids_, return_counts=True)
        for g, c in zip(ids.tolist(), cnt.tolist()):
            acc.setdefault((kind, g), [0] * len(MSG_COUNTS))[col] += c

    def add(col: int, gids: np.ndarray) -> None:
        """Step counts: ``gids`` of the counted rows (only measured ones, gid ≥ 0, count)."""
        add_ids(STEP_GROUP, col, gids[gids >= 0])

    def add_wide(col: int, rows: np.ndarray) -> None:
        """Run and fault-window counts of the counted ``rows`` (indices) of faulted clusters."""
        rows = rows[in_run[rows]]
        if not rows.size:
            return
        add_ids(RUN_GROUP, col, rc[rows])
        bits = int(np.bitwise_or.reduce(fm[rows]))
        for bit in range(MAX_FAULTS):
            if bits >> bit & 1:
                sel = rows[(fm[rows] >> bit) & 1 == 1]
                add_ids(FAULT_GROUP, col, rc[sel] * 64 + bit)

    con = np.flatnonzero(src == DELIVERY)
    if con.size:
        # reorders: per (rc, producer, queue) in receive order (t_received, then seq), seq below the max before it
        qcode = qcodes[con]
        t = tbl.column("t").take(pa.array(con))
        tnull = t.is_null().to_numpy(zero_copy_only=False)
        tv = t.fill_null(0).to_numpy()
        # Spark's window sorts nulls first (ascending)
        order, grp = _groups_of(rc[con], prod[con], qcode, (~tnull).astype(np.int64), tv, seq[con])
        s_seq = seq[con][order]
        g_start = np.flatnonzero(np.diff(np.concatenate(([-1], _runs(rc[con][order], prod[con][order], qcode[order])))) != 0)
        reord = np.zeros(order.size, dtype=bool)
        for a, b in zip(g_start.tolist(), np.append(g_start[1:], order.size).tolist()):
            x = s_seq[a:b]
            if x.size > 1:
                prev = np.maximum.accumulate(x)[:-1]
                reord[a + 1:b] = x[1:] < prev
        add(0, gm[con][order][reord])
        add_wide(0, con[order][reord])
        # distinct and duplicated copies among the measured deliveries of each step: a message fanned out to
        # three queues is three copies, each expected once
        mi = con[gm[con] >= 0]
        if mi.size:
            order2, grp2 = _groups_of(gm[mi], prod[mi], seq[mi], qcodes[mi])
            counts = np.bincount(grp2)
            first = np.concatenate(([0], np.flatnonzero(np.diff(grp2)) + 1))
            g_of = gm[mi][order2][first]
            add(1, g_of)
            add(2, g_of[counts > 1])
        # the same over every delivery of a faulted cluster's run (copies share their stamp, so their t_sent)
        ri = con[in_run[con]]
        if ri.size:
            order3, grp3 = _groups_of(rc[ri], prod[ri], seq[ri], qcodes[ri])
            counts3 = np.bincount(grp3)
            reps = ri[order3][np.concatenate(([0], np.flatnonzero(np.diff(grp3)) + 1))]
            add_wide(1, reps)
            add_wide(2, reps[counts3 > 1])
            add_wide(7, ri[red[ri]])
    pub = np.flatnonzero(src == CANDIDATE)
    # lost: an expected copy of a ack/unconfirmed message that no delivery (with a step window) of its queue has
    # at any time; with unknown routes, a message no delivery of any queue has
    seen = con[gt[con] >= 0] if con.size else con
    if pub.size:
        add(4, gm[pub])
        add_wide(4, pub)
        routed = pub[qcodes[pub] >= 0]
        if routed.size:
            lost = routed[_missing(rc, prod, seq, qcodes, seen, routed)]
            add(3, gm[lost])
            add_wide(3, lost)
        anywhere = pub[qcodes[pub] < 0]
        if anywhere.size:
            lost = anywhere[_missing(rc, prod, seq, np.zeros_like(qcodes), seen, anywhere)]
            add(3, gm[lost])
            add_wide(3, lost)
    cut = np.flatnonzero(src == CUT)
    if cut.size:
        add_wide(5, cut)
        add_wide(6, cut[~_missing(rc, prod, seq, np.zeros_like(qcodes), seen, cut)])
    if acc:
        keys = sorted(acc)
        cols = list(zip(*[acc[k] for k in keys]))
        yield pa.RecordBatch.from_arrays([pa.array([k[0] for k in keys], pa.int8()), pa.array([k[1] for k in keys], pa.int64()),
                                          *[pa.array(c, pa.int64()) for c in cols]], schema=_MSG_ARROW)


def _missing(rc: np.ndarray, prod: np.ndarray, seq: np.ndarray, queue: np.ndarray, seen: np.ndarray, rows: np.ndarray
             ) -> np.ndarray:
    """For each of ``rows`` (indices), whether no row of ``seen`` has its (rc, producer, seq, queue)
    (a sort-merge membership test); a boolean array in the order of ``rows``."""
    both = np.concatenate((seen, rows))
    flag = np.concatenate((np.zeros(seen.size, dtype=np.int64), np.ones(rows.size, dtype=np.int64)))
    order, _ = _groups_of(rc[both], prod[both], seq[both], queue[both], flag)
    key_grp = _runs(rc[both][order], prod[both][order], seq[both][order], queue[both][order])
    has_seen = np.zeros(int(key_grp.max()) + 1, dtype=bool)
    is_seen = flag[order] == 0
    has_seen[key_grp[is_seen]] = True
    missing_sorted = (~is_seen) & ~has_seen[key_grp]
    out = np.zeros(both.size, dtype=bool)
    out[order] = missing_sorted
    result: np.ndarray = out[seen.size:]
    return result


def _runs(*cols: np.ndarray) -> np.ndarray:
    """Run number of each row of already sorted ``cols`` (a new run where any column changes)."""
    n = cols[0].size
    change = np.zeros(n, dtype=bool)
    for c in cols:
        change[1:] |= c[1:] != c[:-1]
    return np.cumsum(change)


# --- assembling the tables ---

COUNTS = ["published_in_window", "confirmed_in_window", "consumed_in_window", "published", *OUTCOME_COLS,
          "deliveries", "redelivered", "reordered", "consumed_unique", "duplicated", "lost", "expected"]
# The per-step and per-second tables are small (one row per step or second): they are built as
# Arrow tables on the driver, not as DataFrames, so no Spark job runs after the sample scans.
STEPS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("cluster", pa.string()), ("step", pa.int32()),
    ("target_rate", pa.float64()), ("window_s", pa.float64()),
    ("warmup_s", pa.float64()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
    ("meas_start_ns", pa.int64()),
    *[(c, pa.int64()) for c in COUNTS],
    *[(f"{m}_{n}_ms", pa.float64()) for m in METRICS for n in [*PCT_NAMES, "max"]],
    ("publish_rate", pa.float64()), ("confirm_rate", pa.float64()),
    ("consume_rate", pa.float64()),
])
TIMELINE_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("cluster", pa.string()), ("second", pa.int64()),
    ("published", pa.int64()), ("consumed", pa.int64()),
    ("e2e_p50_ms", pa.float64()), ("e2e_p99_ms", pa.float64()),
    ("e2e_max_ms", pa.float64()),
])


def _table(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.Table.from_arrays([pa.array(col, f.type) for col, f in zip(columns, schema, strict=True)], schema=schema)


@dataclass
class FaultCounts:
    """What the passes measured for run.json's faults, for the clusters that had one (rbench.reduce.faults
    turns it into figures). Keys: (run_id, cluster) and (run_id, cluster, fault index)."""

    windows: dict[tuple[str, str, int], tuple[int, int]] = field(default_factory=dict)   # the fault's window [lo, hi) ns
    first_confirm_ns: dict[tuple[str, str, int], int | None] = field(default_factory=dict)
    window_fates: dict[tuple[str, str, int], dict[str, int]] = field(default_factory=dict)   # MSG_COUNTS in the window
    run_fates: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)           # MSG_COUNTS over the run
    confirmed: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)           # second → ack confirms


def run_faults(samples: Any) -> list[tuple[str, FaultRecord]]:
    """(run_id, fault) for every fault of the runs' run.json, in (run, cluster, index) order."""
    return [(run.run_id, f) for run in samples.runs for f in sorted(run.record.faults, key=lambda f: (f.cluster, f.index))]


def _fault_counts(plan: Plan, hist: pa.Table | None, msgs: dict[tuple[int, int], dict[str, int]]) -> FaultCounts:
    names = {rc: key for key, rc in plan.rc.items()}
    conf = _counts(hist, TLCONF) if hist is not None else {}
    firsts = _maxes(hist, FIRSTCONF) if hist is not None else {}
    out = FaultCounts()
    for rc, faults in plan.faults.items():
        run_id, cluster = names[rc]
        out.confirmed[(run_id, cluster)] = {sec: n for (r, sec), n in conf.items() if r == rc}
        out.run_fates[(run_id, cluster)] = msgs.get((RUN_GROUP, rc), {c: 0 for c in MSG_COUNTS})
        minima = {pos: -v for (r, pos), v in firsts.items() if r == rc}
        by_start = sorted(range(len(faults)), key=lambda b: faults[b][0].t_end_ns)
        for bit, (f, lo, hi) in enumerate(faults):
            key = (run_id, cluster, f.index)
            out.windows[key] = (lo, hi)
            out.first_confirm_ns[key] = first_after(minima, by_start.index(bit))
            out.window_fates[key] = msgs.get((FAULT_GROUP, rc * 64 + bit), {c: 0 for c in MSG_COUNTS})
    return out


def _maxes(hist: pa.Table, kind: int) -> dict[tuple[int, int], int]:
    """(id, b) → the max of v of one kind of counting-pass entry."""
    k = hist.column("k").to_numpy()
    sel = (k >> _SHIFT) == kind
    ids = (k[sel] & ((1 << _SHIFT) - 1)).tolist()
    # filtered before leaving Arrow: other kinds' null maxima would turn the column into float64 (ns lost)
    vmax = hist.column("bmax").filter(pa.array(sel)).to_pylist()
    return dict(zip(zip(ids, hist.column("b").to_numpy()[sel].tolist()), vmax))


def reduce_samples(samples: Any, mark: Callable[[str], None] | None = None
                   ) -> tuple[pa.Table, pa.Table, list[dict[str, Any]], FaultCounts | None]:
    """The per-step table (one row per (run, cluster, step) of run.json, every figure the report shows),
    the per-second timeline, as Arrow tables, per (run, cluster) the t0 and the count of stale
    deliveries every figure excluded, and what the passes measured for run.json's faults (None without
    any). Three passes; see the module docstring. ``mark`` is told the end of each."""
    mark = mark or (lambda what: None)
    plan = Plan(samples.window_rows, run_faults(samples))
    if on_driver(samples):       # the same passes with numpy, no Spark job (rbench.reduce.small)
        from rbench.reduce.small import DriverPasses

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
    lat = latency_table(samples, plan, step_latencies(samples, plan))
    mark("step latencies (exact percentiles)")
    cnt = {kind: _counts(hist, kind) if hist is not None else {}
           for kind in (PUBRATE, CONFRATE, OUTCOME, CONRATE, DELIV, TLPUB, TLHIST, STALE)}
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
    steps = _table(rows, STEPS_SCHEMA)
    # timeline: per (rc, second)
    names = {rc: key for key, rc in plan.rc.items()}
    tl: dict[tuple[int, int], list[Any]] = {}
    for (rc, sec), n in cnt[TLPUB].items():
        tl.setdefault((rc, sec), [0, 0, None, None, None])[0] += n
    for (ident, _b), n in cnt[TLHIST].items():
        tl.setdefault((ident >> 32, (ident & 0xFFFFFFFF) - _SEC_OFF), [0, 0, None, None, None])[1] += n
    for k, r in ranks.items():
        if k >> _SHIFT == TLHIST:
            ident = k & ((1 << _SHIFT) - 1)
            tl[(ident >> 32, (ident & 0xFFFFFFFF) - _SEC_OFF)][2:] = [r["q"][0] / 1e6, r["q"][1] / 1e6, r["vmax"] / 1e6]
    tl_rows = sorted(((*names[rc], sec, *vals) for (rc, sec), vals in tl.items()), key=lambda r: (r[0], r[1], r[2]))
    stale = [{"run_id": run_id, "cluster": cluster, "t0_ns": plan.t0[rc], "stale": cnt[STALE].get((rc, 0), 0)}
             for (run_id, cluster), rc in sorted(plan.rc.items())]
    faults = _fault_counts(plan, hist, msgs) if plan.faults else None
    return steps, _table(tl_rows, TIMELINE_SCHEMA), stale, faults
