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
  default (rbench.reduce.percentiles explains the two-pass method): rank error 0.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from rbench.reduce.percentiles import exact_percentiles

PERCENTILES: tuple[float, ...] = (0.5, 0.75, 0.95, 0.99, 0.999)
PCT_NAMES: tuple[str, ...] = ("p50", "p75", "p95", "p99", "p999")
LATENCIES: dict[str, str] = {
    "e2e": "end-to-end latency from intended send time: t_received - t_intended",
    "e2e_sent": "end-to-end latency from actual send time: t_received - t_sent",
    "confirm": "publisher-confirm latency: t_confirmed - t_sent (outcomes with a confirm)",
}
PERCENTILE_METHOD = ("exact over every measured message: linear interpolation between the two closest ranks "
                     "(numpy 'linear', Spark percentile(), DuckDB quantile_cont), found by a bucketed two-pass "
                     "selection (rbench.reduce.percentiles); rank error 0")
KEY = ["run_id", "cluster", "step"]
MSG = ["run_id", "cluster", "producer", "seq"]


def tag_measured(df: DataFrame, windows: DataFrame) -> DataFrame:
    """Rows of ``df`` with their step's window, and ``measured`` = t_intended inside it."""
    w = windows.select(*KEY, "meas_start_ns", "end_ns")
    return (df.join(F.broadcast(w), on=KEY, how="inner")
            .withColumn("measured", (F.col("t_intended") >= F.col("meas_start_ns")) & (F.col("t_intended") < F.col("end_ns"))))


def rate_counts(df: DataFrame, windows: DataFrame, time_col: str, name: str, cond: Column | None = None) -> DataFrame:
    """Count rows whose ``time_col`` falls in each step's measurement window (any step tag)."""
    src = df if cond is None else df.where(cond)
    src = src.select("run_id", "cluster", F.col(time_col).alias("_t")).where(F.col("_t").isNotNull())
    w = windows.select(*KEY, "meas_start_ns", "end_ns")
    joined = src.join(F.broadcast(w), on=(src.run_id == w.run_id) & (src.cluster == w.cluster)
                      & (src._t >= w.meas_start_ns) & (src._t < w.end_ns), how="inner")
    return joined.groupBy(w.run_id, w.cluster, w.step).agg(F.count(F.lit(1)).alias(name))


def published_stats(published: DataFrame, windows: DataFrame) -> DataFrame:
    """Counts by outcome and exact confirm-latency percentiles of measured published messages."""
    m = tag_measured(published, windows).where("measured")
    oc = F.col("outcome")
    agg = m.groupBy(*KEY).agg(
        F.count(F.lit(1)).alias("published"),
        F.sum((oc == "ack").cast("long")).alias("acked"),
        F.sum((oc == "nack").cast("long")).alias("nacked"),
        F.sum((oc == "returned").cast("long")).alias("returned"),
        F.sum((oc == "timeout").cast("long")).alias("timeout"),
        F.sum((oc == "unconfirmed").cast("long")).alias("unconfirmed"),
    )
    return agg


def with_reorder_flag(consumed: DataFrame) -> DataFrame:
    """``reordered`` = this delivery's seq is lower than one already received from the same
    producer on the same queue (receive order = t_received, ties by seq)."""
    w = (Window.partitionBy("run_id", "cluster", "producer", "queue").orderBy("t_received", "seq")
         .rowsBetween(Window.unboundedPreceding, -1))
    prev = F.max("seq").over(w)
    return consumed.withColumn("reordered", F.coalesce(F.col("seq") < prev, F.lit(False)))


def latency_percentiles(published: DataFrame, consumed: DataFrame, windows: DataFrame) -> DataFrame:
    """Exact p50 p75 p95 p99 p99.9 and max (ms) of the three latencies of measured messages, per step.

    Columns ``{e2e,e2e_sent,confirm}_{p50,p75,p95,p99,p999,max}_ms``; a step with no
    value for a latency has nulls there. See rbench.reduce.percentiles for the method.
    """
    c = tag_measured(consumed, windows).where("measured")
    p = tag_measured(published, windows).where("measured")
    # both consumed latencies from one scan: two (metric, v) rows per delivery
    pair = F.explode(F.array(F.struct(F.lit("e2e").alias("metric"), (F.col("t_received") - F.col("t_intended")).alias("v")),
                             F.struct(F.lit("e2e_sent").alias("metric"), (F.col("t_received") - F.col("t_sent")).alias("v"))))
    values = (c.select(*KEY, pair.alias("x")).select(*KEY, "x.metric", "x.v")
              .unionByName(p.select(*KEY, F.lit("confirm").alias("metric"), (F.col("t_confirmed") - F.col("t_sent")).alias("v"))))
    res = exact_percentiles(values, [*KEY, "metric"], PERCENTILES)
    aggs = [F.first(F.col(f"q{i}") / 1e6).alias(f"{name}_ms") for i, name in enumerate(PCT_NAMES)]
    aggs.append(F.first(F.col("vmax") / 1e6).alias("max_ms"))
    return res.groupBy(*KEY).pivot("metric", list(LATENCIES)).agg(*aggs)


def consumed_stats(consumed: DataFrame, windows: DataFrame) -> DataFrame:
    """Deliveries, exact end-to-end percentiles and reorders of measured consumed messages."""
    m = tag_measured(with_reorder_flag(consumed), windows).where("measured")
    return m.groupBy(*KEY).agg(
        F.count(F.lit(1)).alias("deliveries"),
        F.sum(F.col("redelivered").cast("long")).alias("redelivered"),
        F.sum(F.col("reordered").cast("long")).alias("reordered"),
    )


def message_stats(published: DataFrame, consumed: DataFrame, windows: DataFrame) -> DataFrame:
    """Distinct messages consumed, duplicated (delivered more than once) and lost per step.

    lost = measured published message with outcome ack or unconfirmed that no consumer
    received at any time in the run (a late delivery in the next step is not a loss).
    """
    per_msg = (tag_measured(consumed, windows)
               .groupBy(*MSG, "step", "measured").agg(F.count(F.lit(1)).alias("n")))
    dup = (per_msg.where("measured").groupBy(*KEY)
           .agg(F.count(F.lit(1)).alias("consumed_unique"), F.sum((F.col("n") > 1).cast("long")).alias("duplicated")))
    seen = per_msg.select(*MSG).distinct()
    lost = (tag_measured(published, windows).where("measured")
            .where(F.col("outcome").isin("ack", "unconfirmed"))
            .join(seen, on=MSG, how="left_anti")
            .groupBy(*KEY).agg(F.count(F.lit(1)).alias("lost")))
    return dup.join(lost, on=KEY, how="full_outer")


def step_stats(published: DataFrame, consumed: DataFrame, windows: DataFrame) -> DataFrame:
    """One row per (run, cluster, step) of run.json, with every figure the report shows."""
    base = windows.select(*KEY, "target_rate", "window_s", "warmup_s", "start_ns", "end_ns", "meas_start_ns")
    rates = [
        rate_counts(published, windows, "t_sent", "published_in_window"),
        rate_counts(published, windows, "t_confirmed", "confirmed_in_window", F.col("outcome") == "ack"),
        rate_counts(consumed, windows, "t_received", "consumed_in_window"),
    ]
    out = base
    for part in [*rates, published_stats(published, windows), consumed_stats(consumed, windows),
                 message_stats(published, consumed, windows), latency_percentiles(published, consumed, windows)]:
        out = out.join(part, on=KEY, how="left")
    counts = ["published_in_window", "confirmed_in_window", "consumed_in_window", "published", "acked", "nacked",
              "returned", "timeout", "unconfirmed", "deliveries", "redelivered", "reordered", "consumed_unique",
              "duplicated", "lost"]
    out = out.fillna(0, subset=counts)
    secs = F.when(F.col("window_s") > 0, F.col("window_s"))
    out = (out.withColumn("publish_rate", F.col("published_in_window") / secs)
              .withColumn("confirm_rate", F.col("confirmed_in_window") / secs)
              .withColumn("consume_rate", F.col("consumed_in_window") / secs))
    return out.orderBy(*KEY)


def timeline(published: DataFrame, consumed: DataFrame, windows: DataFrame) -> DataFrame:
    """Per-second buckets since each cluster's t0: publish and consume counts, p50/p99 e2e.

    Per-second percentiles are for the plot only, so they use percentile_approx
    (accuracy 10000: rank error at most 1/10000 of the bucket's count).
    """
    t0 = windows.groupBy("run_id", "cluster").agg(F.min("t0_ns").alias("t0_ns"))
    pub = (published.join(F.broadcast(t0), on=["run_id", "cluster"])
           .select("run_id", "cluster", F.floor((F.col("t_sent") - F.col("t0_ns")) / 1e9).cast("long").alias("second"))
           .groupBy("run_id", "cluster", "second").agg(F.count(F.lit(1)).alias("published")))
    lat = F.col("t_received") - F.col("t_intended")
    con = (consumed.join(F.broadcast(t0), on=["run_id", "cluster"])
           .withColumn("second", F.floor((F.col("t_received") - F.col("t0_ns")) / 1e9).cast("long"))
           .groupBy("run_id", "cluster", "second")
           .agg(F.count(F.lit(1)).alias("consumed"),
                F.percentile_approx(lat, [0.5, 0.99], 10000).alias("_q"), F.max(lat).alias("_max")))
    con = (con.withColumn("e2e_p50_ms", F.col("_q")[0] / 1e6).withColumn("e2e_p99_ms", F.col("_q")[1] / 1e6)
              .withColumn("e2e_max_ms", F.col("_max") / 1e6).drop("_q", "_max"))
    return (pub.join(con, on=["run_id", "cluster", "second"], how="full_outer")
            .fillna(0, subset=["published", "consumed"]).orderBy("run_id", "cluster", "second"))
