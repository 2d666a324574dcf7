"""Run then reduce on one Spark session, returning the run directory the later steps need.

`rbench run` prints its summary and returns an exit code; the nightly job needs the run's
directory and status to go on with the history, so it drives the same steps itself.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rbench.commands.run import RunOptions, _default_master
from rbench.config.model import Workload
from rbench.errors import ConfigError


@dataclass(frozen=True)
class Outcome:
    run_dir: Path
    status: str


def run_and_reduce(workload: Workload, options: RunOptions, costs: str | None,
                   announce: Callable[[int, str], None]) -> Outcome:
    """Steps 1 and 2 of the nightly job; the reduce writes RUN_DIR/report (what the history reads)."""
    from rbench.config.durations import parse_seconds
    from rbench.coordinator import orphans
    from rbench.coordinator.cleanup import run_queues
    from rbench.coordinator.run import probe_clusters, run_workload
    from rbench.coordinator.summary import print_summary
    from rbench.reduce.job import reduce_runs
    from rbench.spark import local_session

    conf = options.spark_conf()
    try:
        linger = parse_seconds(options.metrics_linger)
    except ValueError as exc:
        raise ConfigError(f"--metrics-linger: {exc}") from None
    probe_clusters(workload)
    orphans.tidy(workload, options.out)          # last night's run, if its pod was killed outright
    session = local_session(options.master or _default_master(), app_name=f"rbench-nightly-{workload.name}", conf=conf)
    with run_queues(workload) as created:        # what the run creates is deleted afterwards, as `rbench run` does
        result = run_workload(workload, options.out, session, tasks=options.tasks, progress=not options.quiet,
                              metrics_port=options.metrics_port, pushgateway=options.pushgateway, metrics_linger_s=linger,
                              queues_created=created)
    if result.status != "complete":
        print_summary(result.run_dir, None)
        return Outcome(result.run_dir, result.status)
    announce(2, f"reduce {result.run_dir.name}")
    reduced = reduce_runs([result.run_dir], session=session, costs_path=costs)
    print_summary(result.run_dir, reduced)
    sys.stdout.flush()
    return Outcome(result.run_dir, result.status)
