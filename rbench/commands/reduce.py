"""`rbench reduce RUN_DIR…`: per-step stats, leaderboards, costs and report.html on Spark.

In-process equivalent of `spark-submit jobs/reduce.py RUN_DIR…`. Definitions of every
figure: docs/reduce.md.
"""
from __future__ import annotations

import argparse
from typing import Any

from rbench.config.durations import parse_seconds
from rbench.errors import ConfigError

HELP = "Reduce run directories into per-step stats, leaderboards, costs and an HTML report."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory (with run.json); several rank together")
    parser.add_argument("--out", default=None, help="report directory (default RUN_DIR/report; required for several runs)")
    parser.add_argument("--tolerance", type=float, default=0.02,
                        help="a step matches when consume rate >= (1 - tolerance) x target (default 0.02)")
    parser.add_argument("--latency-limit", default="1s", help="... and e2e p99 <= this (default 1s; e.g. 250ms)")
    parser.add_argument("--target-rate", type=float, default=None,
                        help="msg/s for the cost-at-target leaderboard (default: highest target every cluster matched)")
    parser.add_argument("--costs", default=None, help="price table (default conf/costs.yaml)")
    parser.add_argument("--force", action="store_true", help="rank runs of different workloads together")
    parser.add_argument("--master", default=None, help="Spark master (default local[2], or what spark-submit set)")
    from rbench.commands.history import add_history_options
    add_history_options(parser)      # --history DIR: append every run to the nightly history (docs/history.md)


def stale_line(clusters: list[dict[str, Any]]) -> str:
    """One line with every cluster's stale count, zeros included, so a reader sees the check was made."""
    multi = len({c["run_id"] for c in clusters}) > 1
    counts = ", ".join(f"{c['run_id'] + '/' if multi else ''}{c['cluster']} {c['stale']:,}" for c in clusters)
    counts = counts or "no cluster measured"
    return f"stale deliveries (an earlier run's messages, excluded from every figure): {counts}"


def run(args: argparse.Namespace) -> int:
    import os

    try:
        limit = parse_seconds(args.latency_limit)
    except ValueError as exc:
        raise ConfigError(f"--latency-limit: {exc}") from None
    from rbench.reduce.job import reduce_runs

    master = args.master or (None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[2]")
    result = reduce_runs(args.run_dirs, out=args.out, tolerance=args.tolerance, latency_limit_s=limit,
                         target_rate=args.target_rate, force=args.force, costs_path=args.costs, master=master)
    for note in result.notes:
        print(f"note: {note}")
    print(stale_line(result.clusters))
    from rbench.reduce.verdict import lines

    for line in lines(result.leaderboard):
        print(line)
    print(f"steps: {result.out_dir / 'steps.parquet'} ({len(result.steps)} steps)")
    if result.faults:
        from rbench.coordinator.summary import fault_line

        several = len({(f["run_id"], f["cluster"]) for f in result.faults}) > 1
        for f in result.faults:
            print(fault_line(f, with_cluster=several))
        print(f"faults: {result.out_dir / 'faults.csv'} ({len(result.faults)} fault(s))")
    print(f"leaderboard: {result.out_dir / 'leaderboard.md'}")
    print(f"report: {result.report}")
    if args.history:
        from rbench.commands.history import add_runs
        add_runs(args, list(args.run_dirs), report=str(result.out_dir))
    return 0
