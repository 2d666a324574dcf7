"""Spark session set-up shared by the run job, the reduce job and the tests.

The only module besides jobs/ and rbench/reduce that imports pyspark.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# Defaults suited to one small machine; spark-submit --conf or conf/spark-defaults.conf override.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter and keep traffic on loopback."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def local_session(master: str | None = None, app_name: str = "rbench", conf: dict[str, str] | None = None) -> Any:
    """Get or create a SparkSession; ``master`` None keeps whatever spark-submit set."""
    prepare_environment()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if os.environ.get("RBENCH_SPARK_LOG") != "verbose":
        log_conf = Path(__file__).with_name("log4j2.properties")
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log_conf}")
    if master:
        builder = builder.master(master)
    for key, value in {**LOCAL_DEFAULTS, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def run_partition(plans: Any) -> Any:
    """Barrier-stage body: run each TaskPlan of this partition (there is exactly one)."""
    from pyspark import BarrierTaskContext

    from rbench.runtime.task import run_task

    ctx = BarrierTaskContext.get()
    attempt = ctx.taskAttemptId()   # unique and increasing across stage retries: the latest attempt wins
    for plan in plans:
        yield run_task(plan, attempt=attempt, barrier=ctx.barrier, all_gather=ctx.allGather)


def submit_barrier_stage(session: Any, plans: list[Any]) -> list[dict[str, Any]]:
    """Run one TaskPlan per Spark task in a barrier stage; all tasks start together."""
    sc = session.sparkContext
    rdd = sc.parallelize(plans, len(plans))
    return rdd.barrier().mapPartitions(run_partition).collect()


def total_slots(session: Any) -> int:
    """Task slots the cluster offers now (local[N]: N; standalone/YARN/k8s: executor cores)."""
    return int(session.sparkContext.defaultParallelism)
