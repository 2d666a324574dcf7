"""The one run sequence every command that sends load goes through (run, perftest, nightly, amqp10 FILE).

In order: the options' own checks and the fixed ports (before any JVM), then the Spark context
starts on a thread of its own (rbench.spark.SparkStart: the JVM takes seconds) while the coordinator
probes the brokers (a broker that is down fails in seconds), reads their facts and limits and tidies an
earlier run killed outright; the snapshot of which queues exist already (rbench.coordinator.cleanup),
the wait for the context, then the
load: one run, or a rate search when the workload has ``rate_search:`` (probes, then one reduce
over them all with the SLO as the match rule), then the reduce and the summary. Commands parse
their arguments, call ``run_sequence`` and print what the outcome says; none repeats a step, so
none can drift from the others (issue 26: the nightly once ran a search workload as one plain
stage and skipped the port check).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rbench.config.model import Workload
from rbench.coordinator.options import RunOptions, check_ports, default_master
from rbench.coordinator.rate_search import Answer, SearchRun, run_search
from rbench.coordinator.timings import Timings

if TYPE_CHECKING:
    from rbench.reduce.job import ReduceResult  # not imported before the run: it imports pyspark.sql
    from rbench.spark import SparkStart

INTERRUPTED = "interrupted"
COMPLETE = "complete"


@dataclass(frozen=True)
class RunOutcome:
    """What a run sequence left: where, how it ended, the reduce, and a rate search's answers."""

    run_dir: Path                           # the run directory; for a rate search, its folder (probes inside)
    status: str                             # complete | interrupted | failed
    measured: bool                          # any message was sent or consumed (a search: any probe ran)
    searched: bool = False                  # the workload's rate_search ran
    probes: tuple[Path, ...] = ()           # a rate search's probe run directories, in order
    answers: tuple[Answer, ...] = ()        # a rate search's answer per cluster (search.json)
    reduced: ReduceResult | None = None     # None with --no-reduce or when nothing was measured

    @property
    def complete(self) -> bool:
        return self.status == COMPLETE and self.measured

    @property
    def exit_code(self) -> int:
        """0 complete; 130 interrupted before anything was measured or during a search; 3 otherwise."""
        if self.complete:
            return 0
        if not self.measured or self.searched:
            return 130 if self.status == INTERRUPTED else 3
        return 3

    @property
    def problem(self) -> str | None:
        """The line a command prints on stderr when the sequence did not end complete, else None."""
        if not self.measured:
            return (f"{self.status} before any load was sent: nothing was measured "
                    f"(run.json: {self.run_dir / 'run.json'})")
        if self.searched and self.status != COMPLETE:
            return f"rate search {self.status}: the probes so far are kept and reduced"
        return None


def run_sequence(workload: Workload, options: RunOptions, app: str = "run",
                 announce_reduce: Callable[[str], None] | None = None) -> RunOutcome:
    """Run ``workload`` start to end (module docstring); ``app`` names the Spark application
    (rbench-APP-WORKLOAD); ``announce_reduce`` is told the run's folder name before the reduce."""
    from rbench.coordinator import orphans
    from rbench.coordinator.broker_facts import read_broker_facts
    from rbench.coordinator.broker_identity import check_sampled_brokers
    from rbench.coordinator.broker_limits import check_broker_limits
    from rbench.coordinator.cleanup import run_queues
    from rbench.coordinator.run import probe_clusters, run_workload
    from rbench.spark import SparkStart

    timings = Timings()
    conf = options.spark_conf()
    linger = options.linger_s()
    listening = options.listening()
    listening.check()
    master = options.master or default_master()
    check_ports(workload, options, master)
    # The JVM and the SparkContext take seconds: they start now, on a thread, and the steps below (none
    # needs Spark) run meanwhile. A probe that fails still fails in seconds: the process exits, and the
    # JVM, whose stdin is this process's pipe, exits with it. The first use of the context waits for it.
    session = SparkStart(master, app_name=f"rbench-{app}-{workload.name}", conf=conf,
                         explicit_master=options.master is not None).start()
    timings.mark("Spark starting (on its own thread)")
    try:
        answered = probe_clusters(workload)       # fail in seconds, not after a Spark stage; who answered
        workload = check_sampled_brokers(workload, answered)   # the sampler reads the load's broker, or not at all
        brokers = read_broker_facts(workload, answered)        # what run.json records the run was measured on
        workload = check_broker_limits(workload, brokers)      # the broker's limits and deprecations (4.x), before load
        timings.mark("brokers probed")
        orphans.tidy(workload, options.out)       # an earlier run killed outright: its run.json and its queues
    except BaseException:
        session.abandon()                         # a context this start made is stopped, now or once it is up
        raise
    # which of its queues exist already: those are never deleted; the rest go afterwards unless queues.keep
    with run_queues(workload) as created:
        timings.mark("queues listed, earlier runs tidied")
        on_load_start = None
        if not options.no_reduce:
            from rbench.reduce.job import warm_up_report, warm_up_summary
            warm_up_summary()                     # the reduce's first imports, while this thread waits for the JVM
            on_load_start = warm_up_report        # the report's, once the start gate no longer needs the GIL
        _ = session.sparkContext                  # the wait for the JVM, if it is still starting
        loaded: SearchRun | RunOutcome
        if workload.rate_search is not None:
            loaded = run_search(workload, options.out, session, options.tasks, not options.quiet, created, brokers,
                                listening)
        else:
            result = run_workload(workload, options.out, session, tasks=options.tasks, progress=not options.quiet,
                                  timings=timings, metrics_port=options.metrics_port, pushgateway=options.pushgateway,
                                  metrics_linger_s=linger, queues_created=created, brokers=brokers, listening=listening,
                                  on_load_start=on_load_start)
            loaded = RunOutcome(result.run_dir, result.status, result.record.messages_moved() > 0)
    timings.mark("the run's queues deleted")
    if isinstance(loaded, SearchRun):
        outcome = _searched(workload, options, session, loaded, announce_reduce)
    else:
        outcome = _reduced(options, session, timings, loaded, announce_reduce)
    if options.timings:
        for label, at in session.marks:           # the start's instants, the pre-started daemon's among them
            timings.mark(label, at)
        print("\nwhere the time went:\n" + timings.table())
    sys.stdout.flush()
    return outcome


def _reduced(options: RunOptions, session: SparkStart, timings: Timings, outcome: RunOutcome,
             announce_reduce: Callable[[str], None] | None) -> RunOutcome:
    """A plain run: reduce it (unless --no-reduce or nothing was measured) and print its summary."""
    from dataclasses import replace

    from rbench.coordinator.summary import print_summary
    from rbench.reduce.job import reduce_runs

    if not outcome.measured:
        return outcome
    if options.no_reduce:
        print_summary(outcome.run_dir, None)
        timings.mark("summary printed")
        return outcome
    if announce_reduce is not None:
        announce_reduce(outcome.run_dir.name)

    def summary(figures: ReduceResult) -> None:      # printed before the report's plots are drawn
        print_summary(outcome.run_dir, figures)
        sys.stdout.flush()
        timings.mark("summary printed (the report's plots next)")

    # the SQL session is built only when a pass of the reduce runs in Spark (large samples)
    reduced = reduce_runs([outcome.run_dir], session=session.session, costs_path=options.costs,
                          mark=lambda what: timings.mark(f"  reduce: {what}"), figures=summary)
    timings.mark("reduce done, report written")
    return replace(outcome, reduced=reduced)


def _searched(workload: Workload, options: RunOptions, session: SparkStart, search: SearchRun,
              announce_reduce: Callable[[str], None] | None) -> RunOutcome:
    """A rate search: one reduce over every probe with the SLO as its match rule, then the answers."""
    from rbench.reduce.job import reduce_runs
    from rbench.reduce.verdict import lines

    rs = workload.rate_search
    assert rs is not None
    reduced = None
    if search.probes and not options.no_reduce:
        if announce_reduce is not None:
            announce_reduce(search.folder.name)
        reduced = reduce_runs(list(search.probes), session=session.session, out=search.folder / "report",
                              latency_limit_s=rs.slo.p99, tolerance=1.0 - rs.slo.consume_ratio, force=True,
                              costs_path=options.costs, search=search.doc)
    print(f"\nrate search ({len(search.probes)} probes of {rs.step:g} s; SLO: e2e p99 <= {rs.slo.p99 * 1000:g} ms and "
          f"consumed >= {rs.slo.consume_ratio:g} × target):")
    for a in search.answers:
        print(f"  {a.line()}")
    if reduced is not None:
        for line in lines(reduced.leaderboard):
            print(line)
        print(f"report: {reduced.report}")
    return RunOutcome(search.folder, search.stopped or COMPLETE, bool(search.probes), searched=True,
                      probes=search.probes, answers=search.answers, reduced=reduced)
