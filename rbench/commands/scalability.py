"""`rbench scalability`: RabbitMQ's ScalabilityTest (queues × bindings, create/route/delete cost), on Spark.

The flags are ScalabilityTest's (-b -x -y -c -n -f) plus rbench's own; a workload file with
`scenario: scalability` says the same (flags win). One Spark task reproduces the classic
single-client test; more tasks churn disjoint shares of the queues at once. docs/scalability.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

HELP = "Routing scalability sweep: time queue create/delete and routing over queues × bindings, log-log plots and slopes."


def add_sweep_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The sweep's shape (ScalabilityTest's flags and rbench's own), every default None so that the workload file,
    then SweepSpec, fills what is not given: `rbench scalability` and `rbench compare --scalability` take them."""
    a = parser.add_argument
    a("-b", "--base", type=int, default=None, help="base of the exponential sweep (default 2)")
    a("-x", type=int, default=None, dest="x", help="queue counts base^i for i < x (default 8)")
    a("-y", type=int, default=None, dest="y", help="bindings per queue base^j for j < y (default 6)")
    a("-c", "--cap", type=int, default=None, help="keep levels with i + j <= cap (default the mean of x and y)")
    a("-n", type=int, default=None, dest="messages", help="messages per routing probe (default 200)")
    a("-f", "--label", default=None, help="name of this series in tables and plots (default the run id)")
    a("--exchange-type", choices=["direct", "topic", "fanout"], default=None, help="exchange type (default direct)")
    a("--repeat", type=int, default=None, metavar="N", help="run the whole sweep N times; plots show median and min–max")
    a("--queue-limit", type=int, default=None, help="refuse a sweep that would exceed this many queues (default 100000)")
    a("--name-prefix", default=None, help="prefix of every name the sweep declares; a run token follows (default rbench-scal-)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("workload", nargs="?", default=None, help="optional workload file with `scenario: scalability` (flags win over it)")
    add_sweep_options(parser)
    a("--tasks", type=int, default=None, help="Spark tasks sharing each phase (default 1: the classic single client)")
    a("--uri", default=None, help="broker (default amqp://guest:guest@127.0.0.1:5672/)")
    a("--prometheus", default=None, metavar="URL",
      help="the broker's Prometheus plugin, for the routed counter and the memory alarm (default http://HOST:15692, "
           "checked before the sweep to answer for the --uri broker; RabbitMQ 4.0 here: http://127.0.0.1:15780)")
    a("--out", default="results", help="results root; the sweep goes to OUT/<run_id>/ (default results)")
    a("--master", default=None, help="Spark master (default local[*], or what spark-submit set)")
    a("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark configuration")
    a("--quiet", action="store_true", help="no line per phase")


def spec_from_args(args: argparse.Namespace) -> Any:
    from rbench.scenarios.scalability.plan import SweepSpec
    from rbench.scenarios.scalability.workload import load_sweep_file

    values: dict[str, Any] = load_sweep_file(args.workload) if args.workload else {}
    for f in dataclasses.fields(SweepSpec):
        flag = getattr(args, f.name, None)
        if flag is not None:
            values[f.name] = flag
    return SweepSpec(**values)


def run(args: argparse.Namespace) -> int:
    from rbench.coordinator.options import default_master, spark_conf
    from rbench.scenarios.scalability.broker_check import checked_spec
    from rbench.scenarios.scalability.output import slopes_markdown, summary, table_markdown
    from rbench.scenarios.scalability.plan import validate
    from rbench.scenarios.scalability.sweep import Sweep, spark_submitter
    from rbench.spark import local_session

    spec = spec_from_args(args)
    validate(spec)                                  # a bad flag fails before a JVM starts
    conf = spark_conf(args.conf)
    spec = checked_spec(spec, probe(spec.uri))     # a --prometheus (or its guess) of another broker: one line
    session = local_session(args.master or default_master(), app_name="rbench-scalability", conf=conf)
    submit, cancel = spark_submitter(session, spec.tasks)
    echo = (lambda _line: None) if args.quiet else (lambda line: print(line, flush=True))
    sweep = Sweep(spec, submit, args.out, echo=echo, cancel=cancel)
    result = with_sigterm_as_interrupt(sweep.run)
    levels = summary(result.rows)
    if levels:
        print("\n" + table_markdown(levels) + "\n\n" + slopes_markdown(levels))
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"\nrbench scalability: {result.status}; report: {result.run_dir / 'report' / 'scalability.md'}")
    return 0 if result.status in ("complete", "memory-alarm") else 3


def with_sigterm_as_interrupt(fn: Any) -> Any:
    """SIGTERM (a scheduler stopping the job) cleans up as Ctrl-C does, instead of leaving queues behind."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return fn()

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        return fn()
    finally:
        signal.signal(signal.SIGTERM, previous)


def probe(uri: str) -> Any:
    """Fail in seconds when the broker does not answer, before Spark starts; who answered (BrokerIdentity)."""
    import asyncio

    from rbench.config.types import ClusterTarget
    from rbench.coordinator.broker_identity import from_server_properties
    from rbench.drivers.amqp091 import Amqp091Driver

    async def probe() -> Any:
        driver = Amqp091Driver()
        await driver.open(ClusterTarget("scalability", (uri,)))
        try:
            return from_server_properties(driver.server_properties)
        finally:
            await driver.aclose()

    return asyncio.run(probe())
