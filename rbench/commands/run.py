"""`rbench run FILE`: run a workload on Spark and write its samples.

In-process equivalent of `spark-submit jobs/run.py FILE`; `--master` picks the
cluster manager (default local[*], or whatever spark-submit already set).
"""
from __future__ import annotations

import argparse

from rbench.config.load import load_workload

HELP = "Run a workload on Spark (local[*] by default) and write Parquet samples."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", help="workload YAML file")
    add_run_options(parser)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="results", help="results root; the run goes to OUT/<run_id>/ (default results)")
    parser.add_argument("--master", default=None, help="Spark master, e.g. local[2], spark://host:7077 (default local[*])")
    parser.add_argument("--tasks", type=int, default=None, help="Spark tasks per cluster (default: min(queues, slots))")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark configuration")
    parser.add_argument("--no-reduce", action="store_true", help="skip the summary reduce after the run")
    parser.add_argument("--quiet", action="store_true", help="no status line per second")


def run(args: argparse.Namespace) -> int:
    workload = load_workload(args.workload)
    return execute(workload, args)


def execute(workload: object, args: argparse.Namespace) -> int:
    from rbench.errors import ConfigError
    from rbench.job import probe_clusters, run_workload
    from rbench.sparkglue import local_session
    from rbench.summary import print_summary

    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--conf: expected KEY=VALUE, got {item!r}")
        conf[key] = value
    probe_clusters(workload)  # type: ignore[arg-type]  # fail in seconds, before a JVM starts
    session = local_session(args.master or _default_master(), app_name=f"rbench-run-{workload.name}", conf=conf)  # type: ignore[attr-defined]
    result = run_workload(workload, args.out, session, tasks=args.tasks, progress=not args.quiet)  # type: ignore[arg-type]
    print_summary(result.run_dir, session=session, reduce=not args.no_reduce)
    return 0 if result.status == "complete" else 3


def _default_master() -> str | None:
    """local[*] unless spark-submit already chose a master."""
    import os

    # under spark-submit the JVM gateway already exists and carries the chosen master
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[*]"
