"""Figures per phase of a consumer.pause run: steady, build-up, drain (docs/broker.md).

run.json says when each phase began (rbench.coordinator.pause). Per phase the reduce reports:

* build-up: duration, rate at which the backlog grew (broker depth samples; client counts beside);
* peak backlog: the largest depth the broker reported (and the client's own count);
* drain time: from resuming until the depth is back at or under ``drained_below`` -- from the broker's
  depth samples, and from the client's counts (copies expected − copies received, 0.1 s buckets);
* consume rate while draining: deliveries received between resuming and the drained instant ÷ time;
* end-to-end latency from the intended send time (p50, p99, max) of the messages sent in each phase.

The client counts come from one Spark aggregation into 0.1 s buckets; latency percentiles are exact
(Spark's ``percentile``) per phase.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import functions as F

from rbench.reduce.broker import BrokerSeries
from rbench.samples.record import PauseRecord
from rbench.samples.schema import MAY_BE_DELIVERED

BUCKET_NS = 100_000_000
PHASE_COLUMNS = ("run_id", "cluster", "phase", "start_s", "end_s", "duration_s", "backlog_at_start",
                 "buildup_rate", "buildup_rate_client", "peak_backlog", "peak_backlog_client", "drain_s",
                 "drain_s_client", "drain_consume_rate", "e2e_p50_ms", "e2e_p99_ms", "e2e_max_ms", "messages")


def _bucket_counts(df: Any, t: str, t0: int) -> dict[int, int]:
    rows = df.where(F.col(t).isNotNull()).groupBy(F.floor((F.col(t) - F.lit(t0)) / BUCKET_NS).alias("b")).count().collect()
    return {int(r["b"]): int(r["count"]) for r in rows}


def _cumulative(counts: dict[int, int], lo: int, hi: int) -> np.ndarray:
    """Cumulative count at the end of each bucket lo..hi."""
    arr = np.zeros(hi - lo + 1, dtype=np.float64)
    for b, n in counts.items():
        if b < lo:
            arr[0] += n
        elif b <= hi:
            arr[b - lo] += n
    return np.cumsum(arr)


def phase_figures(samples: Any, series: list[BrokerSeries]) -> list[dict[str, Any]]:
    """One row (PHASE_COLUMNS) per phase of every paused (run, cluster)."""
    by_key = {(s.run_id, s.cluster): s for s in series}
    pubs = {(r, c): df for r, c, df in samples.pub_branches}
    cons = {(r, c): df for r, c, df in samples.con_branches}
    out: list[dict[str, Any]] = []
    for run in samples.runs:
        for c in run.clusters:
            if c.pause is None or not c.pause.phases or c.t0_ns is None:
                continue
            key = (run.run_id, c.name)
            end_ns = c.load_end() or 0
            out += _cluster_phases(key, c.t0_ns, end_ns, c.pause, by_key.get(key), pubs.get(key), cons.get(key))
    return out


def _cluster_phases(key: tuple[str, str], t0: int, end_ns: int, pause: PauseRecord, s: BrokerSeries | None,
                    pub: Any, con: Any) -> list[dict[str, Any]]:
    phases = pause.phases
    copies = float(pause.copies_per_message or 1.0)
    threshold = float(pause.drained_below)
    # client counts in 0.1 s buckets since t0: copies expected (published × copies) and copies received
    sent = _bucket_counts(pub.where(F.col("outcome").isin(*MAY_BE_DELIVERED)), "t_sent", t0) if pub is not None else {}
    recv = _bucket_counts(con.where(F.col("t_intended") >= F.lit(t0)), "t_received", t0) if con is not None else {}
    hi = max([*sent, *recv, int((end_ns - t0) // BUCKET_NS)], default=0)
    cum_sent = _cumulative(sent, 0, hi) * copies
    cum_recv = _cumulative(recv, 0, hi)
    client_backlog = np.maximum(cum_sent - cum_recv, 0)
    bucket_end_ns = t0 + (np.arange(hi + 1) + 1) * BUCKET_NS

    bounds = [p.start_ns for p in phases] + [max(end_ns, phases[-1].start_ns)]
    lat = _phase_latency(con, t0, bounds) if con is not None else {}
    rows = []
    for i, p in enumerate(phases):
        start, stop = bounds[i], bounds[i + 1]
        row: dict[str, Any] = {k: None for k in [*PHASE_COLUMNS]}
        row.update({"run_id": key[0], "cluster": key[1], "phase": p.phase, "start_s": (start - t0) / 1e9,
                    "end_s": (stop - t0) / 1e9, "duration_s": (stop - start) / 1e9, "backlog_at_start": p.backlog,
                    **lat.get(i, {})})
        in_phase = (bucket_end_ns > start) & (bucket_end_ns <= stop)
        if in_phase.any():
            row["peak_backlog_client"] = float(client_backlog[in_phase].max())
        if s is not None:
            t, d = s.depth_samples(start, stop)
            if d.size:
                row["peak_backlog"] = float(d.max())
            if p.phase == "build-up" and d.size > 1 and t[-1] > t[0]:
                row["buildup_rate"] = float((d[-1] - d[0]) / ((t[-1] - t[0]) / 1e9))
        if p.phase == "build-up" and in_phase.sum() > 1:
            idx = np.flatnonzero(in_phase)
            span = (idx[-1] - idx[0]) * BUCKET_NS / 1e9
            row["buildup_rate_client"] = float((client_backlog[idx[-1]] - client_backlog[idx[0]]) / span)
        if p.phase == "drain":
            if s is not None:
                t, d = s.depth_samples(start)
                under = np.flatnonzero(d <= threshold)
                if under.size:
                    row["drain_s"] = (int(t[under[0]]) - start) / 1e9
            after = np.flatnonzero((bucket_end_ns > start) & (client_backlog <= threshold))
            if after.size:
                drained_at = int(bucket_end_ns[after[0]])
                row["drain_s_client"] = (drained_at - start) / 1e9
                got = cum_recv[after[0]] - np.interp(start, bucket_end_ns, cum_recv)
                if drained_at > start:
                    row["drain_consume_rate"] = float(got / ((drained_at - start) / 1e9))
        rows.append(row)
    return rows


def _phase_latency(con: Any, t0: int, bounds: list[int]) -> dict[int, dict[str, Any]]:
    """Exact p50, p99 and max of t_received − t_intended (ms) of the messages sent in each phase."""
    ti = F.col("t_intended")
    phase = None
    for i in range(len(bounds) - 1):
        cond = (ti >= F.lit(bounds[i])) & (ti < F.lit(bounds[i + 1]))
        phase = F.when(cond, F.lit(i)) if phase is None else phase.when(cond, F.lit(i))
    if phase is None:
        return {}
    e2e = (F.col("t_received") - ti).cast("double") / 1e6
    rows = (con.where(ti >= F.lit(t0)).select(phase.alias("ph"), e2e.alias("e2e")).where(F.col("ph").isNotNull())
            .groupBy("ph").agg(F.expr("percentile(e2e, array(0.5, 0.99))").alias("q"), F.max("e2e").alias("mx"),
                               F.count(F.lit(1)).alias("n")).collect())
    return {int(r["ph"]): {"e2e_p50_ms": r["q"][0], "e2e_p99_ms": r["q"][1], "e2e_max_ms": r["mx"], "messages": int(r["n"])}
            for r in rows}
