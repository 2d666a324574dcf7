"""Leaderboards over the per-step table: throughput, matched target, cost.

A step *matches* its target when the achieved consume rate is at least
``(1 - tolerance) × target_rate`` and the exact p99 end-to-end latency (from intended
send time) is at most the latency limit. Steps without a target (unlimited rate) or
without consumed messages never match. Clusters are ranked across every run given.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

COST_SCHEMA = T.StructType([
    T.StructField("cluster", T.StringType()), T.StructField("nodes", T.IntegerType()),
    T.StructField("instance_type", T.StringType()), T.StructField("volume_type", T.StringType()),
    T.StructField("volume_gb", T.DoubleType()), T.StructField("monthly_cost", T.DoubleType()),
])


def mark_matched(steps: DataFrame, tolerance: float, latency_limit_ms: float) -> DataFrame:
    """Add ``matched`` (bool, never null) to the per-step table."""
    ok = ((F.col("target_rate").isNotNull()) & (F.col("consume_rate").isNotNull()) & (F.col("e2e_p99_ms").isNotNull())
          & (F.col("consume_rate") >= F.lit(1.0 - tolerance) * F.col("target_rate"))
          & (F.col("e2e_p99_ms") <= F.lit(latency_limit_ms)))
    return steps.withColumn("matched", F.coalesce(ok, F.lit(False)))


def _best(df: DataFrame, order: list[Any]) -> DataFrame:
    w = Window.partitionBy("cluster").orderBy(*order)
    return df.withColumn("_rn", F.row_number().over(w)).where("_rn = 1").drop("_rn")


BROKER_COLS = ("broker_cpu_us_per_msg", "broker_mem_peak_mb")


def _broker_cols(steps: DataFrame) -> list[str]:
    """The broker's figures of the step (rbench.reduce.broker), when the reduce added them."""
    return [c for c in BROKER_COLS if c in steps.columns]


def top_throughput(steps: DataFrame) -> DataFrame:
    """Per cluster, the step with the highest achieved consume rate (ties: lower p99)."""
    s = steps.where(F.col("consume_rate").isNotNull())
    best = _best(s, [F.desc("consume_rate"), F.asc_nulls_last("e2e_p99_ms"), "run_id", "step"])
    return (best.select("cluster", "run_id", "step", "target_rate", "consume_rate", "publish_rate", "e2e_p99_ms", "matched",
                        *_broker_cols(steps))
            .orderBy(F.desc("consume_rate")))


def highest_matched(steps: DataFrame) -> DataFrame:
    """Per cluster, the matched step with the highest target rate (clusters with none are absent)."""
    s = steps.where("matched")
    best = _best(s, [F.desc("target_rate"), F.desc("consume_rate"), "run_id", "step"])
    return (best.select("cluster", "run_id", "step", "target_rate", "consume_rate", "e2e_p99_ms", *_broker_cols(steps))
            .orderBy(F.desc("target_rate"), F.desc("consume_rate")))


def costs_frame(spark: SparkSession, costs: list[dict[str, Any]]) -> DataFrame:
    """The per-cluster monthly costs (from rbench.reduce.costs) as a DataFrame."""
    rows = [(c["cluster"], int(c["nodes"]), c["instance_type"], c["volume_type"], float(c["volume_gb"]), float(c["monthly_cost"]))
            for c in costs]
    return spark.createDataFrame(rows, COST_SCHEMA)


def cost_at_top(top: DataFrame, costs: DataFrame) -> DataFrame:
    """Monthly cost per 1000 msg/s at each cluster's top throughput, cheapest first."""
    return (top.join(costs, on="cluster", how="inner")
            .withColumn("cost_per_1k_rate", F.when(F.col("consume_rate") > 0, F.col("monthly_cost") / (F.col("consume_rate") / 1000.0)))
            .select("cluster", "nodes", "instance_type", "volume_type", "monthly_cost", "consume_rate", "cost_per_1k_rate")
            .orderBy(F.asc_nulls_last("cost_per_1k_rate"), "cluster"))


def cost_at_target(steps: DataFrame, costs: DataFrame, target_rate: float) -> DataFrame:
    """Clusters that matched a target of at least ``target_rate``, with cost per 1000 msg/s at it.

    Cost is normalised by the chosen target (the rate you need), not by the achieved
    rate, so the cheapest cluster able to carry that load comes first.
    """
    ok = (steps.where(F.col("matched") & (F.col("target_rate") >= F.lit(float(target_rate))))
          .groupBy("cluster").agg(F.max("target_rate").alias("highest_matched_target")))
    return (ok.join(costs, on="cluster", how="inner")
            .withColumn("target_rate", F.lit(float(target_rate)))
            .withColumn("cost_per_1k_rate", F.col("monthly_cost") / (F.lit(float(target_rate)) / 1000.0))
            .select("cluster", "nodes", "instance_type", "monthly_cost", "target_rate", "highest_matched_target", "cost_per_1k_rate")
            .orderBy("cost_per_1k_rate", "cluster"))


def default_target(steps: DataFrame) -> float | None:
    """The highest target every cluster matched (fair comparison), else the highest any matched."""
    clusters = [r["cluster"] for r in steps.select("cluster").distinct().collect()]
    per = steps.where("matched").groupBy("target_rate").agg(F.countDistinct("cluster").alias("n")).collect()
    if not per:
        return None
    everyone = [r["target_rate"] for r in per if r["n"] == len(clusters)]
    return float(max(everyone)) if everyone else float(max(r["target_rate"] for r in per))
