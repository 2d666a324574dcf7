"""`rbench history add RUN_DIR` and `rbench history show`: the nightly record of reduce results.

The history layout, and what each row carries: docs/history.md.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from rbench.errors import ConfigError

HELP = "Append a reduced run to the nightly history (add), or print and plot a metric over nights (show)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rbench.cli import ArgumentParser

    sub = parser.add_subparsers(dest="history_command", metavar="{add,show}", required=True, parser_class=ArgumentParser)
    add = sub.add_parser("add", help="append RUN_DIR's reduce output (steps, leaderboard) and metadata to the history")
    add.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory (with run.json and report/ from `rbench reduce`)")
    add_history_options(add)
    add.add_argument("--report", default=None, help="the reduce's output directory (default RUN_DIR/report)")
    add.add_argument("--night", default=None, help="night to file it under, YYYY-MM-DD (default: the run's start date, UTC)")
    add.add_argument("--force", action="store_true", help="add a run whose status is not complete")
    show = sub.add_parser("show", help="print (and plot) one metric of every cluster and step over the nights")
    show.add_argument("--history", default=None, help="history directory (default $RBENCH_HISTORY)")
    show.add_argument("--workload", default=None, help="workload name (default: the only one in the history)")
    show.add_argument("--metric", default="consume_rate", help="steps.parquet column, e.g. consume_rate, e2e_p99_ms (default consume_rate)")
    show.add_argument("--cluster", default=None, help="only this cluster")
    show.add_argument("--step", type=int, default=None, help="only this step (numbered from 1)")
    show.add_argument("--last", type=int, default=None, help="only the last N nights")
    show.add_argument("--plot", default=None, metavar="PNG", help="also plot the trend to this PNG file")


def add_history_options(parser: argparse.ArgumentParser) -> None:
    """--history/--commit/--broker-version, shared with `rbench reduce --history`."""
    parser.add_argument("--history", default=None, help="history directory (default $RBENCH_HISTORY)")
    parser.add_argument("--commit", default=None, help="commit (of the broker config, rbench, ...) this night ran, kept as metadata")
    parser.add_argument("--broker-version", default=None, help="broker version, when run.json does not say")


def add_runs(args: argparse.Namespace, run_dirs: list[str], report: str | None = None, night: str | None = None,
             force: bool = False) -> None:
    from rbench.history.store import add_run, history_dir

    history = history_dir(args.history)
    for run_dir in run_dirs:
        added = add_run(history, run_dir, report_dir=report, night=night, commit=args.commit,
                        broker_version=args.broker_version, force=force)
        verb = "replaced" if added.replaced else "added"
        print(f"history: {verb} {added.run_id} ({added.steps} step rows) as workload {added.workload}, "
              f"night {added.night} → {added.path}")


def run(args: argparse.Namespace) -> int:
    if args.history_command == "add":
        add_runs(args, args.run_dirs, args.report, args.night, args.force)
        return 0
    return show(args)


def show(args: argparse.Namespace) -> int:
    from rbench.history.store import history_dir, pick_workload, read_steps
    from rbench.report.figures import fmt
    from rbench.samples.conventions import shown_step

    history = history_dir(args.history)
    workload = pick_workload(history, args.workload)
    table = read_steps(history, workload)
    if args.metric not in table.schema.names:
        raise ConfigError(f"--metric: no column {args.metric!r} in the history (e.g. consume_rate, e2e_p99_ms, confirm_p99_ms)")
    rows = table.to_pylist()
    if args.cluster is not None:
        rows = [r for r in rows if r["cluster"] == args.cluster]
    if args.step is not None:
        rows = [r for r in rows if shown_step(r["step"]) == args.step]
    if not rows:
        raise ConfigError("--cluster/--step: no rows of the history match")
    rows.sort(key=lambda r: (str(r["night"]), str(r.get("started_at") or ""), r["run_id"], r["cluster"], r["step"]))
    nights = sorted({str(r["night"]) for r in rows})
    if args.last is not None:
        keep = set(nights[-args.last:])
        rows = [r for r in rows if str(r["night"]) in keep]
    print(f"{workload}: {args.metric} per night (from each night's reduce, steps numbered from 1)")
    print(f"{'night':<11} {'run':<36} {'cluster':<12} {'step':>4} {args.metric:>16}  commit / broker / rbench")
    series: dict[str, tuple[list[str], list[float]]] = {}
    brokers: dict[tuple[str, int], str] = {}          # the last broker version seen per series
    for r in rows:
        v = r.get(args.metric)
        meta = " / ".join(str(r.get(k) or "–") for k in ("commit", "broker_version", "rbench_version"))
        key, broker = (r["cluster"], r["step"]), r.get("broker_version")
        if broker and brokers.get(key, broker) != broker:
            meta += f"  (broker changed {brokers[key]} → {broker})"
        if broker:
            brokers[key] = broker
        print(f"{str(r['night']):<11} {r['run_id']:<36} {r['cluster']:<12} {shown_step(r['step']):>4} "
              f"{fmt(v, args.metric):>16}  {meta}")
        if v is not None:
            xs, ys = series.setdefault(f"{r['cluster']} step {shown_step(r['step'])}", ([], []))
            xs.append(str(r["night"]))
            ys.append(float(v))
    if args.plot:
        from rbench.history.summary import history_plot
        print(f"plot: {history_plot(series, args.metric, Path(args.plot))}")
    return 0
