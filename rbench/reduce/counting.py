"""The counting pass and the fetch pass (rbench.reduce.stats' docstring, steps 2 and 3).

Every sample row becomes a few ``(k, b, v)`` entries: ``k = kind << SHIFT | id`` says what is counted and
for which window / step / second, ``b`` a sub-key (outcome, latency bucket), ``v`` a latency. One hash
aggregation counts them per ``(k, b)`` with the max of ``v``; the fetch pass then reads back the values
of the few latency buckets holding a needed rank (rbench.reduce.percentiles)."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rbench.reduce.percentiles import bucket_of, finish_ranks, plan_ranks
from rbench.reduce.plan import Plan, case
from rbench.samples.schema import ACK, OUTCOMES

# kinds of counting-pass entries: k = kind << SHIFT | id
PUBRATE, CONFRATE, OUTCOME, TLPUB, CONRATE, DELIV, TLHIST, STALE, TLCONF, FIRSTCONF = range(1, 11)
SHIFT = 48
SEC_OFF = 1 << 31                              # TLHIST id = rc << 32 | (second + 2^31)
NO_LAT = -(1 << 62)                            # TLHIST sub-key of a row without a latency


def _entry(kind: int, ident: Column, b: Column, v: Column | None = None) -> Column:
    return F.struct((F.lit(kind << SHIFT) + ident).alias("k"), b.cast("long").alias("b"),
                    (v if v is not None else F.lit(None)).cast("long").alias("v"))


def _published_entries(plan: Plan, rc: int, what: str) -> list[Column]:
    gm = plan.gid_measured(rc)
    oc = F.col("outcome")
    code = case([(oc == name, i) for i, name in enumerate(OUTCOMES)])
    out = [_entry(PUBRATE, w, F.lit(0)) for w in plan.windows_of(rc, F.col("t_sent"))]
    out += [_entry(CONFRATE, F.when(oc == OUTCOMES[ACK], w), F.lit(0)) for w in plan.windows_of(rc, F.col("t_confirmed"))]
    out += [_entry(OUTCOME, gm, F.coalesce(code, F.lit(len(OUTCOMES)))),
            _entry(TLPUB, F.lit(rc), plan.second(rc, "t_sent"))]
    if rc in plan.faults:      # confirms per second, and the earliest confirm after each fault (max of −t)
        ack = F.when(oc == OUTCOMES[ACK], F.lit(rc))
        out += [_entry(TLCONF, ack, plan.second(rc, "t_confirmed")),
                _entry(FIRSTCONF, ack, plan.after_fault(rc, F.col("t_confirmed")), -F.col("t_confirmed"))]
    return out


def _consumed_entries(plan: Plan, rc: int, what: str) -> list[Column]:
    fresh = plan.fresh(rc)                      # a stale row yields only its STALE entry (null k elsewhere)
    gm = F.when(fresh, plan.gid_measured(rc))
    e2e = F.col("t_received") - F.col("t_intended")
    tl = F.when(fresh, F.lit(rc << 32) + plan.second(rc, "t_received") + F.lit(SEC_OFF))
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
        sel = ((k >> SHIFT) == kind) & (b != NO_LAT)
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


def counts(hist: pa.Table, kind: int) -> dict[tuple[int, int], int]:
    """(id, b) → the count of one kind of counting-pass entry."""
    k = hist.column("k").to_numpy()
    sel = (k >> SHIFT) == kind
    ids = (k[sel] & ((1 << SHIFT) - 1)).tolist()
    return dict(zip(zip(ids, hist.column("b").to_numpy()[sel].tolist()), hist.column("c").to_numpy()[sel].tolist()))


def maxes(hist: pa.Table, kind: int) -> dict[tuple[int, int], int]:
    """(id, b) → the max of v of one kind of counting-pass entry."""
    k = hist.column("k").to_numpy()
    sel = (k >> SHIFT) == kind
    ids = (k[sel] & ((1 << SHIFT) - 1)).tolist()
    # filtered before leaving Arrow: other kinds' null maxima would turn the column into float64 (ns lost)
    vmax = hist.column("bmax").filter(pa.array(sel)).to_pylist()
    return dict(zip(zip(ids, hist.column("b").to_numpy()[sel].tolist()), vmax))
