"""`rbench plan FILE`: show how the workload splits over Spark tasks."""
from __future__ import annotations

import argparse

from rbench.commands.argtypes import positive_int
from rbench.config.load import load_workload
from rbench.plan import default_task_count, describe, plan

HELP = "Print how a workload's producers, consumers and queues split over Spark tasks."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", help="workload YAML file")
    parser.add_argument("--slots", type=positive_int, default=2, help="task slots to plan for (default 2, like local[2])")
    parser.add_argument("--tasks", type=positive_int, default=None, help="force this many tasks")


def run(args: argparse.Namespace) -> int:
    w = load_workload(args.workload)
    n = args.tasks or default_task_count(w, args.slots)
    for cluster in w.clusters:
        plans = plan(w, cluster.name, n, run_id="plan", out_dir="-")
        print(f"cluster {cluster.name}: {n} task(s), driver {w.resolved_driver()}, "
              f"{'co-located (one clock per queue)' if w.colocate else 'spread'}")
        print(describe(plans))
    return 0
