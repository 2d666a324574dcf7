"""`rbench nightly WORKLOAD --history DIR`: the scheduled job, as one command (helm/rbench runs it).

Steps, in order, each announced on stdout: 1 run the workload (rbench.coordinator.sequence, as
`rbench run` does: a `rate_search:` workload searches, and the history gets the search's answer),
2 reduce it (report, steps, leaderboards), 3 add it to the history, 4 (--regress) judge it against
the nights before, 5 (--upload URI) copy the run and the history to an object store. A failed run stops before
the history is touched, so a broken night never enters the baseline.
Exit status: 0, 1 when regress found a regression, 2 bad input, 3 the run did not complete, 4 when regress
had too few nights to judge (docs/history.md).
"""
from __future__ import annotations

import argparse
from pathlib import Path

HELP = "Nightly job: run a workload, reduce it, add it to the history, optionally regress and upload."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rbench.commands.history import add_history_options
    from rbench.commands.run import add_run_options

    parser.add_argument("workload", help="workload YAML file")
    add_run_options(parser)
    add_history_options(parser)
    parser.add_argument("--costs", default=None, help="price table for the reduce (default conf/costs.yaml)")
    parser.add_argument("--regress", action="store_true", help="run `rbench regress` on the history as the last step (exit 1 on a regression)")
    parser.add_argument("--upload", default=None, metavar="URI",
                        help="copy the run and the history to this pyarrow filesystem URI (file://, s3://, gs://, abfs://, hdfs://)")


def _step(n: int, text: str) -> None:
    print(f"\nnightly step {n}: {text}", flush=True)


def run(args: argparse.Namespace) -> int:
    from rbench.commands.history import add_runs
    from rbench.config.load import load_workload
    from rbench.coordinator.options import RunOptions
    from rbench.coordinator.sequence import run_sequence
    from rbench.history.store import history_dir

    if args.no_reduce:
        from rbench.errors import ConfigError
        raise ConfigError("--no-reduce: the nightly job always reduces (the history is filled from the reduce)")
    workload = load_workload(args.workload)
    history = history_dir(args.history)          # fail before any load is sent
    if args.upload:
        from rbench.nightly.upload import filesystem_for
        filesystem_for(args.upload)                # a bad URI fails now, not after an hour of load
    _step(1, f"run {workload.name}")
    outcome = run_sequence(workload, RunOptions.from_args(args), app="nightly",
                           announce_reduce=lambda name: _step(2, f"reduce {name}"))
    if not outcome.complete:
        why = outcome.problem or f"the run ended {outcome.status}"
        print(f"nightly: {why}; the history is left unchanged ({outcome.run_dir})")
        return 3
    _step(3, f"add {outcome.run_dir.name} to the history {history}")
    add_runs(args, [str(outcome.run_dir)])
    status = 0
    if args.regress:
        _step(4, "regress: tonight against the nights before")
        from rbench.cli import ArgumentParser
        from rbench.commands import regress

        parser = ArgumentParser(prog="rbench regress")
        regress.add_arguments(parser)
        status = regress.run(parser.parse_args(["--history", str(history), "--workload", workload.name,
                                                "--run", outcome.run_dir.name]))
    if args.upload:
        from rbench.nightly.upload import upload_dirs

        _step(5, "upload")
        for done in upload_dirs({f"runs/{outcome.run_dir.name}": outcome.run_dir, "history": Path(history)}, args.upload):
            print(f"uploaded {done.files} files: {done.source} → {done.destination}")
    return status
