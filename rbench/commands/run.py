"""`rbench run FILE`: run a workload on Spark and write its samples.

In-process equivalent of `spark-submit jobs/run.py FILE`; `--master` picks the
cluster manager (default local[*], or whatever spark-submit already set).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Any

from rbench.commands.argtypes import port, positive_int
from rbench.config.load import load_workload
from rbench.config.model import Workload

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


@dataclass(frozen=True)
class RunOptions:
    """How to run a workload, apart from the workload itself.

    One holder for `rbench run`'s options so that every command that ends in a run
    (run, perftest, scenarios) gets the same defaults as the command line.
    """

    out: str = "results"
    master: str | None = None
    tasks: int | None = None
    conf: list[str] = field(default_factory=list)
    stage_attempts: int | None = None
    no_reduce: bool = False
    quiet: bool = False
    timings: bool = False
    metrics_port: int | None = None
    pushgateway: str | None = None
    metrics_linger: str = "0s"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})

    def spark_conf(self) -> dict[str, str]:
        """The Spark configuration these options ask for: every --conf KEY=VALUE, then --stage-attempts."""
        from rbench.commands.argtypes import spark_conf
        from rbench.spark import STAGE_ATTEMPTS_KEY

        conf = spark_conf(self.conf)
        if self.stage_attempts is not None:
            conf[STAGE_ATTEMPTS_KEY] = str(self.stage_attempts)
        return conf


def run(args: argparse.Namespace) -> int:
    workload = load_workload(args.workload)
    return execute(workload, RunOptions.from_args(args))


def execute(workload: Workload, args: RunOptions) -> int:
    from rbench.coordinator.run import probe_clusters, run_workload
    from rbench.coordinator.summary import print_summary
    from rbench.coordinator.timings import Timings
    from rbench.errors import ConfigError
    from rbench.spark import local_session

    timings = Timings()
    conf = args.spark_conf()
    from rbench.config.durations import parse_seconds
    try:
        linger = parse_seconds(args.metrics_linger)
    except ValueError as exc:
        raise ConfigError(f"--metrics-linger: {exc}") from None
    master = args.master or _default_master()
    if master is None or master.startswith("local"):       # executors run here: their ports can be checked now
        from rbench.plan import default_task_count

        n = args.tasks or (workload.tasks if isinstance(workload.tasks, int) else
                           default_task_count(workload, _local_slots(master)))
        if workload.metrics_port:
            ports_free("metrics_port", workload.metrics_port, n, "task i listens on metrics_port + i")
    if args.metrics_port:
        ports_free("--metrics-port", args.metrics_port, 1, "the run's /metrics")
    probe_clusters(workload)  # fail in seconds, before a JVM starts
    timings.mark("brokers probed")
    from rbench.coordinator import orphans
    from rbench.coordinator.cleanup import run_queues

    orphans.tidy(workload, args.out)      # an earlier run killed outright: its run.json and its queues
    session = local_session(master, app_name=f"rbench-run-{workload.name}", conf=conf)
    timings.mark("Spark session ready")
    # which of its queues exist already: those are never deleted; the rest go afterwards unless queues.keep
    with run_queues(workload) as created:
        if workload.rate_search is not None:
            return _rate_search(workload, args, session, created)
        result = run_workload(workload, args.out, session, tasks=args.tasks, progress=not args.quiet, timings=timings,
                              metrics_port=args.metrics_port, pushgateway=args.pushgateway, metrics_linger_s=linger,
                              queues_created=created)
    if not result.record.messages_moved():
        print(f"rbench run: {result.status} before any load was sent: nothing was measured "
              f"(run.json: {result.run_dir / 'run.json'})", file=sys.stderr)
        return 130 if result.status == "interrupted" else 3
    reduced = None
    if not args.no_reduce:
        from rbench.reduce.job import reduce_runs

        reduced = reduce_runs([result.run_dir], session=session, mark=lambda what: timings.mark(f"  reduce: {what}"))
        timings.mark("reduce done, report written")
    print_summary(result.run_dir, reduced)
    timings.mark("summary printed")
    if args.timings:
        print("\nwhere the time went:\n" + timings.table())
    return 0 if result.status == "complete" else 3


def _rate_search(workload: Workload, args: RunOptions, session: Any, created: dict[str, list[str]]) -> int:
    """`rate_search` in the workload: probes as runs of their own, then one reduce over them all."""
    from pathlib import Path

    from rbench.coordinator.rate_search import search_cluster, search_doc, write_search
    from rbench.coordinator.run import run_workload
    from rbench.reduce.job import reduce_runs
    from rbench.samples.runinfo import new_run_id

    rs = workload.rate_search
    assert rs is not None
    folder = Path(args.out) / f"{new_run_id(workload.name)}-search"
    probes: list[str | Path] = []

    def run_probe(w: Workload) -> Path:
        result = run_workload(w, folder, session, tasks=args.tasks, progress=not args.quiet, queues_created=created)
        probes.append(result.run_dir)
        if result.status != "complete":
            raise _ProbeStopped(result.status)
        return result.run_dir

    answers = []
    stopped: str | None = None
    print(f"rbench: rate search → {folder}", flush=True)
    for cluster in workload.clusters:
        try:
            answers.append(search_cluster(workload.model_copy(update={"clusters": [cluster]}), run_probe))
        except _ProbeStopped as exc:
            stopped = str(exc)
            break
    if answers:
        write_search(folder, answers, workload)
    reduced = None
    if probes and not args.no_reduce:
        reduced = reduce_runs(probes, session=session, out=folder / "report", latency_limit_s=rs.slo.p99,
                              tolerance=1.0 - rs.slo.consume_ratio, force=True,
                              search=search_doc(answers, workload) if answers else None)
    print(f"\nrate search ({len(probes)} probes of {rs.step:g} s; SLO: e2e p99 <= {rs.slo.p99 * 1000:g} ms and consumed >= "
          f"{rs.slo.consume_ratio:g} × target):")
    for a in answers:
        print(f"  {a.line()}")
    if reduced is not None:
        from rbench.reduce.verdict import lines

        for line in lines(reduced.leaderboard):
            print(line)
        print(f"report: {reduced.report}")
    if stopped is not None:
        print(f"rbench run: rate search {stopped}: the probes so far are kept and reduced", file=sys.stderr)
        return 130 if stopped == "interrupted" else 3
    return 0


class _ProbeStopped(Exception):
    """A probe did not complete (interrupt, failure): the search ends there."""


def ports_free(field: str, first: int, count: int, why: str) -> None:
    """ConfigError naming ``field`` when a fixed port this run needs is taken on this host.

    A fixed port is a promise to whoever scrapes it: a taken one is an error before any JVM
    starts, never a quiet move to another port (issue 11)."""
    import socket

    from rbench.errors import ConfigError

    for number in range(first, first + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # as the metrics server does
            try:
                s.bind(("0.0.0.0", number))
            except OSError as exc:
                which = f"port {number}" if count == 1 else f"port {number} ({why}, {count} tasks)"
                raise ConfigError(f"{field}: {which} is already in use on this host ({exc.strerror}); "
                                  f"choose a free port, or 0 for any free port") from None


def _local_slots(master: str | None) -> int:
    """Task slots of a local[N] / local[*] master."""
    import os

    inside = (master or "local[*]").partition("[")[2].rstrip("]").split(",")[0]
    return int(inside) if inside.isdigit() else (os.cpu_count() or 1)


def _default_master() -> str | None:
    """local[*] unless spark-submit already chose a master."""
    import os

    # under spark-submit the JVM gateway already exists and carries the chosen master
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[*]"
