"""`rbench amqp10 URL`: quiver-style AMQP 1.0 send/receive benchmark on the `amqp10` driver.

One sender and one receiver process on this machine (no Spark: a quick answer), quiver's
2-second table and RESULTS block, latency in µs resolution; ``--output DIR`` writes the
summary as JSON (quiver's keys plus rbench's) and the samples as Parquet. See docs/amqp10.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rbench.errors import ConfigError

HELP = "Quiver-style AMQP 1.0 benchmark: one sender and one receiver process on the amqp10 driver."


def _count(text: str) -> int:
    try:
        value = int(float(text.replace("_", "").replace("m", "e6").replace("k", "e3")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a message count like 100000 or 1m, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds like 10 or 10s, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("url", help="amqp://user:pass@host:port/vhost[?address=v2]; or a workload YAML file, run through the "
                  "Spark job with driver amqp10")
    a("--queue", default="", help="queue to use (declared over AMQP 0.9.1 if missing: the 3.x plugin cannot declare); "
                                  "default: a fresh one, deleted afterwards")
    a("--count", type=_count, default=None, help="messages to send (default 1m unless --duration is given)")
    a("--duration", type=_seconds, default=0.0, help="seconds to send for (default: until --count)")
    a("--body-size", type=int, default=100, help="body bytes; at least rbench's 24-byte stamp is sent (default 100)")
    a("--credit", type=int, default=1000, help="receiver link credit window (default 1000)")
    a("--durable", action="store_true", help="durable queue and durable messages")
    a("--settlement", choices=["unsettled", "presettled"], default="unsettled",
      help="unsettled: the broker's disposition settles each message; presettled: at-most-once (default unsettled)")
    a("--rate", type=float, default=0.0, help="open-loop send rate in msg/s; latency from the intended send time "
                                              "(default 0: as fast as credit allows)")
    a("--window", type=int, default=1000,
      help="sender: max unsettled deliveries (default 1000; 0: the broker's credit only, as quiver does, which "
           "on RabbitMQ 3.x floods the queue and starves the receiver's credit top-ups)")
    a("--warmup", type=_seconds, default=0.0, help="seconds excluded from the latency statistics")
    a("--output", type=Path, default=None, metavar="DIR", help="write summary.json and samples.parquet here "
                                                               "(with a workload: the results root)")
    a("--master", default=None, help="with a workload file: the Spark master (default local[*])")


def run(args: argparse.Namespace) -> int:
    from rbench.scenarios.quiver import QuiverOptions, write_outputs
    from rbench.scenarios.quiver import run as run_scenario

    if args.url.endswith((".yaml", ".yml")):
        return _workload(args)
    if args.body_size < 0:
        raise ConfigError("--body-size: expected bytes >= 0")
    count = args.count if args.count is not None else (0 if args.duration else 1_000_000)
    opts = QuiverOptions(uri=args.url, queue=args.queue, count=count, duration=args.duration,
                         body_size=args.body_size, credit=args.credit, durable=args.durable,
                         settlement=args.settlement, rate=args.rate, warmup=args.warmup, window=args.window)
    result = run_scenario(opts, line=lambda text: print(text, flush=True))
    print(result.results_block())
    if args.output is not None:
        summary, samples = write_outputs(result, args.output)
        print(f"summary: {summary}\nsamples: {samples}")
    lost = result.sender.count - result.receiver.count
    if lost > 0:
        print(f"warning: {lost:,} of {result.sender.count:,} messages were not received", file=sys.stderr)
        return 1
    return 0


def _workload(args: argparse.Namespace) -> int:
    """The workload file through the run sequence (as `rbench run`), its driver set to amqp10."""
    from rbench.commands.run import run_and_report
    from rbench.config.load import load_workload
    from rbench.coordinator.options import RunOptions

    workload = load_workload(args.url, driver="amqp10")
    return run_and_report(workload, RunOptions(out=str(args.output or "results"), master=args.master), "amqp10")
