"""`rbench run FILE`: run a workload on Spark and write its samples.

In-process equivalent of `spark-submit jobs/run.py FILE`; `--master` picks the
cluster manager (default local[*], or whatever spark-submit already set). The steps are
rbench.coordinator.sequence's, shared with every command that runs load.
"""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rbench.commands.argtypes import port, positive_int
from rbench.config.load import load_workload

if TYPE_CHECKING:
    from rbench.config.model import Workload
    from rbench.coordinator.options import RunOptions

HELP = "Run a workload on Spark (local[*] by default) and write Parquet samples."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", help="workload YAML file")
    add_run_options(parser)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="results", help="results root; the run goes to OUT/<run_id>/ (default results)")
    parser.add_argument("--master", default=None, help="Spark master, e.g. local[2], spark://host:7077 (default local[*])")
    parser.add_argument("--tasks", type=positive_int, default=None, help="Spark tasks per cluster (default: min(queues, slots))")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark configuration")
    parser.add_argument("--stage-attempts", type=positive_int, default=None, metavar="N",
                        help="how many times a cluster's Spark stage may run when a task or executor is lost: the load "
                             "restarts from step 1 and only the last attempt counts (default 2: one restart; 1: none; "
                             "spark.stage.maxConsecutiveAttempts)")
    parser.add_argument("--no-reduce", action="store_true", help="skip the summary reduce after the run")
    parser.add_argument("--quiet", action="store_true", help="no status line per second")
    parser.add_argument("--timings", action="store_true", help="print where the wall-clock seconds went (start-up, load, reduce)")
    parser.add_argument("--metrics-port", type=port, default=None, metavar="PORT",
                        help="serve the run's merged /metrics on the driver at PORT (0 = any free port; "
                             "default: any free port when the workload sets metrics_port, else off)")
    parser.add_argument("--pushgateway", default=None, metavar="URL",
                        help="push the run's final metrics to this Prometheus Pushgateway (job rbench, grouped by run_id)")
    parser.add_argument("--metrics-linger", default="0s", metavar="DURATION",
                        help="keep the run's /metrics up this long after the run, for a last scrape (default 0s)")
    parser.add_argument("--metrics-bind", default="0.0.0.0", metavar="ADDR",
                        help="address the run's /metrics and every task's /metrics listen on (default 0.0.0.0: any; "
                             "127.0.0.1 keeps them to the host they run on)")
    parser.add_argument("--metrics-user", default=None, metavar="NAME",
                        help="HTTP basic auth on the run's and every task's /metrics: this user, the password from the "
                             "environment variable RBENCH_METRICS_PASSWORD (never a flag)")
    parser.add_argument("--metrics-tls-cert", default=None, metavar="FILE",
                        help="serve the run's /metrics over HTTPS with this PEM certificate (with --metrics-tls-key)")
    parser.add_argument("--metrics-tls-key", default=None, metavar="FILE", help="the private key of --metrics-tls-cert")
    parser.add_argument("--control-tls-cert", default=None, metavar="FILE",
                        help="run the control channel (tasks ⇄ coordinator) over TLS with this PEM certificate, "
                             "pinned in the task plans (self-signed is fine; with --control-tls-key)")
    parser.add_argument("--control-tls-key", default=None, metavar="FILE", help="the private key of --control-tls-cert")


def run(args: argparse.Namespace) -> int:
    from rbench.coordinator.options import RunOptions

    return run_and_report(load_workload(args.workload), RunOptions.from_args(args), "run")


def run_and_report(workload: Workload, options: RunOptions, command: str) -> int:
    """The run sequence, then its problem line (if any) on stderr as `rbench COMMAND: …`; returns the exit code."""
    from rbench.coordinator.sequence import run_sequence

    outcome = run_sequence(workload, options)
    if outcome.problem is not None:
        print(f"rbench {command}: {outcome.problem}", file=sys.stderr)
    return outcome.exit_code
