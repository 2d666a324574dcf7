"""`rbench validate FILE`: check a workload without touching a broker.

Exit 2 with one line for anything `rbench plan` or `rbench run` would refuse before Spark starts
(the rules live in rbench.config.checks and run whenever a workload is loaded); only what the host
or the broker alone can answer (a busy port, a refused login) is left to the run."""
from __future__ import annotations

import argparse
import json

from rbench.config.load import load_workload, workload_schema

HELP = "Validate a workload file (or print its JSON schema)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", nargs="?", help="workload YAML file")
    parser.add_argument("--schema", action="store_true", help="print the workload JSON schema and exit")
    parser.add_argument("--costs", default=None, help="price file to check instance and volume types against "
                                                       "(default conf/costs.yaml)")


def run(args: argparse.Namespace) -> int:
    if args.schema:
        print(json.dumps(workload_schema(), indent=2))
        return 0
    if not args.workload:
        from rbench.errors import ConfigError
        raise ConfigError("validate: expected a workload file (or --schema)")
    from rbench.reduce.costs import load_prices, monthly_cost

    w = load_workload(args.workload)       # every rule of rbench.config.checks: what plan and run would refuse
    if w.publisher.body_files:
        from rbench.perftest.bodies import file_bodies

        file_bodies(w.publisher.body_files)   # read as the planner reads them, so a missing file fails here too
    prices = load_prices(args.costs)
    costs = [monthly_cost(c.model_dump(), prices) for c in w.clusters]   # unknown types fail before any output
    steps = w.steps()
    rates = ", ".join("unlimited" if s.rate is None else f"{s.rate:g}" for s in steps[:6]) + (" …" if len(steps) > 6 else "")
    print(f"ok: {w.name}: {len(w.clusters)} cluster(s), {w.producers} producer(s), {w.consumers} consumer(s), "
          f"{len(w.queues.names(w.name))} {w.queues.type} queue(s), {len(steps)} step(s) at {rates} msg/s per producer, "
          f"{sum(s.duration for s in steps):g} s, driver {w.resolved_driver()}")
    for c, cost in zip(w.clusters, costs):
        print(f"   cluster {c.name}: {c.nodes} × {c.instance_type} + {c.volume_gb} GB {c.volume_type}: "
              f"{cost['monthly_cost']:,.2f} {prices.currency}/month")
    for i, f in enumerate(w.faults):
        back = "back at the end of the run" if f.restart_after is None else f"back after {f.restart_after:g} s"
        back = "" if f.action == "restart" else f", {back}"
        targets = ", ".join(c.name for c in w.fault_targets(f))
        print(f"   fault {i + 1}: {f.action} {f.node} at {f.at:g} s{back} (cluster {targets})")
    return 0
