"""`rbench stream-publish`: RbFly-style stream publishing benchmark (single and batch-of-100).

Runs in this process (no Spark): the point is to measure one client's publishing
rate and CPU cost against a stream, the way RbFly's performance report does, with
the same driver rbench workloads use.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rbench.config.types import ClusterTarget
from rbench.config.uri import check_driver_options
from rbench.errors import ConfigError

HELP = "Benchmark stream publishing: N single confirmed messages and M in confirmed batches (RbFly style)."

DEFAULT_URI = "amqp://guest:guest@127.0.0.1:5672/"


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rate in msg/s (a positive number), got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a rate in msg/s (a positive number), got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("--uri", default=DEFAULT_URI,
      help="rabbitmq-stream://user:pass@host:5552/vhost, or an amqp:// URI (same credentials, port 5552) "
           f"(default {DEFAULT_URI})")
    a("--stream", default=None, help="stream to publish to (default: a fresh one, deleted afterwards)")
    a("--keep-stream", action="store_true", help="do not delete the stream afterwards")
    a("--single", type=_positive, default=200_000, metavar="N",
      help="messages in the single variant, each confirmed before the next (default 200000)")
    a("--batch", type=_positive, default=1_000_000, metavar="M",
      help="messages in the batch variant (default 1000000)")
    a("--batch-size", type=_positive, default=100, help="messages per confirmed batch (default 100)")
    a("--rate", type=_rate, default=None, metavar="MSG/S",
      help="cap each round's publishing rate: message n goes out no earlier than n / rate s into its round "
           "(a batch at its first message's time); default none, as fast as confirms allow")
    a("--rounds", type=_positive, default=3, help="repetitions of each variant; the median is reported (default 3)")
    a("--variants", default="single,batch", help="comma-separated subset of single,batch (default both)")
    a("--format", dest="message_format", choices=["amqp", "binary"], default="amqp",
      help="AMQP 1.0 data section or raw body (default amqp)")
    a("--plot", type=Path, default=None, metavar="PNG", help="write a box plot of msgs/s per variant")
    a("--json", type=Path, default=None, metavar="FILE", help="write every round and the medians as JSON")
    a("--quiet", action="store_true", help="no line per round")


def _target(uri: str) -> ClusterTarget:
    if uri.startswith("rabbitmq-stream"):
        return ClusterTarget("cli", (), stream_uris=(uri,))
    if uri.startswith("amqp"):
        check_driver_options(uri, "stream")          # the stream URI derived from it would drop ?address=…
        return ClusterTarget("cli", (uri,))
    raise ConfigError(f"--uri: expected rabbitmq-stream:// or amqp://, got a {uri.split(':', 1)[0]!r} URI")


def run(args: argparse.Namespace) -> int:
    from rbench.scenarios.stream_publish import RoundResult, Variant, box_plot
    from rbench.scenarios.stream_publish import run as run_scenario

    wanted = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(wanted) - {"single", "batch"})
    if unknown or not wanted:
        raise ConfigError(f"--variants: expected single and/or batch, got {args.variants!r}")
    variants = [Variant("single", args.single, 1) if v == "single" else Variant("batch", args.batch, args.batch_size)
                for v in wanted]

    def progress(r: RoundResult) -> None:
        if not args.quiet:
            print(f"round {r.round + 1}/{args.rounds} {r.variant:<6} {r.messages:>9,} msgs "
                  f"{r.rate:>11,.0f} msg/s {r.cpu_us_per_msg:>7.2f} µs CPU/msg", flush=True)

    report = run_scenario(_target(args.uri), variants, args.rounds, args.message_format, args.stream,
                          args.keep_stream, progress, args.rate)
    print(report.table())
    if args.plot is not None:
        print(f"box plot: {box_plot(report, args.plot, f'rbench stream-publish ({args.message_format})')}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report.as_dict(), indent=2))
        print(f"json: {args.json}")
    return 0
