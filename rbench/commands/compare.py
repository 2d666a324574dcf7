"""`rbench compare`: is B faster than A, or is the difference noise?

Three kinds of side, one method (interleaved rounds A B, B A, …; per figure the ratio B/A over the rounds
with its interval and a verdict; compare.json, compare.md and compare.html in OUT/<time>-<name>-compare/):

- ``rbench compare WORKLOAD --rounds N``: the workload's clusters, each round one full run per cluster;
- ``rbench compare --scalability [SWEEP_FILE] --uri A --uri B``: the routing sweep on each broker, per level;
- ``rbench compare --amqp10 URL_A URL_B``: the quiver-style AMQP 1.0 send/receive on each broker.

The options of each kind are its own command's (`rbench run`, `rbench scalability`, `rbench amqp10`);
one given to another kind is refused in one line rather than ignored. docs/compare.md.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from rbench.commands.argtypes import positive_int

HELP = ("Compare clusters or brokers (A, B …) over interleaved rounds: ratios B/A with 95 % intervals, for a workload, "
        "the scalability sweep (--scalability) or the AMQP 1.0 send/receive (--amqp10).")

_SWEEP = ("base", "x", "y", "cap", "messages", "label", "exchange_type", "repeat", "queue_limit", "name_prefix")
_SWEEP_FLAGS = {"base": "-b/--base", "x": "-x", "y": "-y", "cap": "-c/--cap", "messages": "-n", "label": "-f/--label",
                "uri": "--uri", "prometheus": "--prometheus"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rbench.commands.amqp10 import add_send_receive_options
    from rbench.commands.run import add_run_options
    from rbench.commands.scalability import add_sweep_options

    parser.add_argument("workload", nargs="?", default=None,
                        help="workload YAML file with at least 2 clusters (the first is A); with --scalability, an "
                             "optional sweep file (`scenario: scalability`, flags win)")
    parser.add_argument("--rounds", type=positive_int, default=4, metavar="N",
                        help="rounds; each runs every side once, in the order A B, then B A, … (default 4; at least 2)")
    parser.add_argument("--confidence", type=_fraction, default=0.95, metavar="P",
                        help="the intervals' confidence, a fraction in (0.5, 1) (default 0.95); a sweep's per-level "
                             "intervals hold at P together")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--scalability", action="store_true",
                      help="compare the routing scalability sweep on the --uri brokers (2 or more), per sweep level")
    mode.add_argument("--amqp10", nargs="+", default=None, metavar="[NAME=]URL",
                      help="compare the AMQP 1.0 send/receive of `rbench amqp10` on these brokers (2 or more; the "
                           "first is A; a bare URL is named host:port)")
    add_run_options(parser)
    sweep = parser.add_argument_group("with --scalability (as `rbench scalability`)")
    sweep.add_argument("--uri", action="append", default=None, metavar="[NAME=]URL",
                       help="a broker to sweep; once per side, the first is A (a bare URL is named host:port)")
    sweep.add_argument("--prometheus", action="append", default=None, metavar="URL",
                       help="each broker's Prometheus plugin, in --uri order (default: each AMQP host's port 15692, "
                            "checked to answer for that broker)")
    add_sweep_options(sweep)
    add_send_receive_options(parser.add_argument_group("with --amqp10 (as `rbench amqp10`)"), defaults=False)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction like 0.95, got {text!r}") from None
    if not 0.5 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0.5, 1) like 0.95, got {text!r}")
    return value


def _given(args: argparse.Namespace, names: tuple[str, ...] | list[str]) -> list[str]:
    return [n for n in names if getattr(args, n, None) not in (None, False, [])]


def _flag(name: str) -> str:
    return _SWEEP_FLAGS.get(name, "--" + name.replace("_", "-"))


def _refuse_foreign(args: argparse.Namespace, mode: str) -> None:
    """One line for an option of another kind of comparison, which would otherwise be ignored."""
    from rbench.commands.amqp10 import DEFAULTS as SEND_RECEIVE
    from rbench.commands.run import add_run_options
    from rbench.errors import ConfigError

    defaults = argparse.ArgumentParser()
    add_run_options(defaults)
    run_defaults = vars(defaults.parse_args([]))
    run_only = [k for k, v in run_defaults.items() if getattr(args, k) != v and k not in ("out", "quiet")]
    kinds = {"scalability": ([*_SWEEP, "uri", "prometheus"], "--scalability"),
             "amqp10": (list(SEND_RECEIVE), "--amqp10")}
    for kind, (names, flag) in kinds.items():
        if kind != mode and _given(args, names):
            raise ConfigError(f"{_flag(_given(args, names)[0])}: only with {flag}")
    if mode == "scalability":
        bad = [k for k in run_only if k not in ("master", "tasks", "conf")]
    elif mode == "amqp10":
        bad = run_only
    else:
        return
    if bad:
        raise ConfigError(f"{_flag(bad[0])}: not an option of compare --{mode}")


def run(args: argparse.Namespace) -> int:
    from rbench.compare.rounds import check_rounds

    mode = "scalability" if args.scalability else "amqp10" if args.amqp10 is not None else "workload"
    _refuse_foreign(args, mode)
    check_rounds(args.rounds)
    if mode == "scalability":
        return _scalability(args)
    if mode == "amqp10":
        return _amqp10(args)
    return _workload(args)


def _workload(args: argparse.Namespace) -> int:
    from rbench.compare.result import analyse
    from rbench.compare.rounds import check_comparable, new_folder, run_rounds
    from rbench.config.load import load_workload
    from rbench.coordinator.options import RunOptions
    from rbench.coordinator.run import probe_clusters
    from rbench.errors import ConfigError

    if args.workload is None:
        raise ConfigError("workload: expected a workload file with at least 2 clusters, or --scalability / --amqp10")
    if args.no_reduce:
        raise ConfigError("--no-reduce: compare reads every round's reduce")
    workload = load_workload(args.workload)
    check_comparable(workload, args.rounds)
    probe_clusters(workload)          # every cluster answers before round 1, not only when its turn comes
    folder = new_folder(args.out, workload.name)
    ran = run_rounds(workload, RunOptions.from_args(args), args.rounds, folder)
    if ran.stopped is not None:
        print(f"rbench compare: stopped at {ran.stopped}", file=sys.stderr)
    if len(ran.rounds) < 2:
        return ran.exit_code or 3
    return _report(analyse(workload.name, folder, [c.name for c in workload.clusters], ran.rounds, args.confidence), ran.exit_code)


def _scalability(args: argparse.Namespace) -> int:
    from rbench.commands.scalability import probe, spec_from_args, with_sigterm_as_interrupt
    from rbench.compare.rounds import new_folder
    from rbench.compare.sweep import analyse_sweeps, run_sweep_rounds, target_specs
    from rbench.compare.targets import parse_targets
    from rbench.coordinator.options import default_master, spark_conf
    from rbench.errors import ConfigError
    from rbench.scenarios.scalability.broker_check import checked_spec
    from rbench.scenarios.scalability.plan import SweepSpec, validate
    from rbench.scenarios.scalability.sweep import Sweep, spark_submitter
    from rbench.spark import local_session

    targets = parse_targets(args.uri or [], "--uri")
    prometheus = args.prometheus or []
    if prometheus and len(prometheus) != len(targets):
        raise ConfigError(f"--prometheus: expected one per --uri ({len(targets)}), got {len(prometheus)}")
    if args.label is not None:
        raise ConfigError("-f/--label: compare names each sweep after its side (NAME=URL in --uri)")
    base: SweepSpec = spec_from_args(argparse.Namespace(**{**vars(args), "uri": None, "prometheus": None}))
    specs = target_specs(base, targets, prometheus)
    for spec in specs.values():
        validate(spec)                                   # a bad flag fails before a JVM starts
    specs = {name: checked_spec(spec, probe(spec.uri)) for name, spec in specs.items()}   # each answers, rightly
    session = local_session(args.master or default_master(), app_name="rbench-compare-scalability",
                            conf=spark_conf(args.conf))
    submit, cancel = spark_submitter(session, base.tasks)
    folder = new_folder(args.out, "scalability")
    echo = (lambda _line: None) if args.quiet else (lambda line: print(line, flush=True))

    def run_sweep(spec: SweepSpec) -> Any:
        return with_sigterm_as_interrupt(Sweep(spec, submit, folder, echo=echo, cancel=cancel).run)

    swept = run_sweep_rounds(specs, args.rounds, run_sweep, folder)
    if swept.ran.stopped is not None:
        print(f"rbench compare: stopped at {swept.ran.stopped}", file=sys.stderr)
    if len(swept.ran.rounds) < 2:
        return swept.ran.exit_code or 3
    return _report(analyse_sweeps(folder, targets, base, swept.ran.rounds, swept, args.confidence), swept.ran.exit_code)


def _amqp10(args: argparse.Namespace) -> int:
    from rbench.commands.amqp10 import quiver_options
    from rbench.compare.amqp10 import analyse_amqp10, run_amqp10_rounds
    from rbench.compare.rounds import new_folder
    from rbench.compare.targets import parse_targets
    from rbench.errors import ConfigError

    if args.workload is not None:
        raise ConfigError(f"{args.workload}: compare --amqp10 takes the brokers' URLs after --amqp10, not a file")
    targets = parse_targets(args.amqp10, "--amqp10")
    options = {t.name: quiver_options(args, t.uri) for t in targets}
    for o in options.values():
        o.check()                                        # a malformed URL or option fails before any process starts
    folder = new_folder(args.out, "amqp10")
    line = (lambda _text: None) if args.quiet else (lambda text: print(text, flush=True))
    runs = run_amqp10_rounds(options, args.rounds, folder, line)
    if runs.ran.stopped is not None:
        print(f"rbench compare: stopped at {runs.ran.stopped}", file=sys.stderr)
    if len(runs.ran.rounds) < 2:
        return runs.ran.exit_code or 3
    first = options[targets[0].name]
    return _report(analyse_amqp10(folder, targets, first, runs.ran.rounds, runs, args.confidence), runs.ran.exit_code)


def _report(result: Any, exit_code: int) -> int:
    """compare.json, compare.md, compare.html; one verdict line per figure on the terminal."""
    from rbench.compare.page import write_page
    from rbench.compare.result import write_files

    paths = [*write_files(result), write_page(result)]
    n = len(result.rounds)
    print(f"\ncomparison over {n} rounds (B/A; CI from the paired rounds' log-ratios, t with {n - 1} df; "
          f"{result.confidence * 100:g} % unless the line says otherwise):")
    for pair in result.pairs:
        print(f"  {pair.b} (B) against {pair.a} (A):")
        for m in pair.metrics:
            print(f"    {m.key:<26} {m.verdict}")
    for note in result.notes:
        print(f"  note: {note}")
    print("files: " + ", ".join(str(p) for p in paths))
    return exit_code
