"""`rbench amqp10 URL`: quiver-style AMQP 1.0 send/receive benchmark on the `amqp10` driver.

One sender and one receiver process on this machine (no Spark: a quick answer), quiver's
2-second table and RESULTS block, latency in µs resolution; ``--output DIR`` writes the
summary as JSON (quiver's keys plus rbench's) and the samples as Parquet. See docs/amqp10.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

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


# The send/receive options' defaults: `rbench amqp10` and `rbench compare --amqp10` read them from here.
DEFAULTS: dict[str, Any] = {"count": None, "duration": 0.0, "body_size": 100, "credit": 1000, "durable": False,
                               "settlement": "unsettled", "rate": 0.0, "window": 1000, "warmup": 0.0}
IN_FLIGHT_DEFAULT = -1                  # the window


def add_send_receive_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, defaults: bool = True) -> None:
    """The options of one send/receive (count or duration, body, credit, settlement, rate, window, warm-up).

    ``defaults=False`` leaves every default None, so a command that has other modes can tell what was given."""
    def d(name: str) -> Any:
        return DEFAULTS[name] if defaults else None

    a = parser.add_argument
    a("--count", type=_count, default=None, help="messages to send (default 1m unless --duration is given)")
    a("--duration", type=_seconds, default=d("duration"), help="seconds to send for (default: until --count)")
    a("--body-size", type=int, default=d("body_size"),
      help="body bytes; at least rbench's 24-byte stamp is sent (default 100)")
    a("--credit", type=int, default=d("credit"), help="receiver link credit window (default 1000)")
    a("--durable", action="store_true", default=d("durable"), help="durable queue and durable messages")
    a("--settlement", choices=["unsettled", "presettled"], default=d("settlement"),
      help="unsettled: the broker's disposition settles each message; presettled: at-most-once (default unsettled)")
    a("--rate", type=float, default=d("rate"), help="open-loop send rate in msg/s; latency from the intended send time "
                                                    "(default 0: as fast as credit allows)")
    a("--window", type=int, default=d("window"),
      help="sender: max unsettled deliveries (default 1000; 0: the broker's credit only, as quiver does, which "
           "on RabbitMQ 3.x floods the queue and starves the receiver's credit top-ups)")
    a("--in-flight", type=int, default=IN_FLIGHT_DEFAULT if defaults else None, metavar="N",
      help="sender: max messages sent and not yet received (default: --window; 0: no bound). Without a "
           "bound a sender faster than the receiver fills the queue, and latency at saturation is the queue's")
    a("--in-flight-policy", choices=["adaptive", "fixed"], default="adaptive" if defaults else None,
      help="adaptive (default): closed loop, the bound follows the delivery rate x the least round trip seen "
           "(x2, as BBR), between the receiver's credit and --in-flight; fixed: always --in-flight")
    a("--warmup", type=_seconds, default=d("warmup"), help="seconds excluded from the latency statistics")


def quiver_options(args: argparse.Namespace, uri: str, queue: str = "", keep_queue: bool = False) -> Any:
    """The QuiverOptions the send/receive options ask for, on ``uri`` (an option not given takes DEFAULTS')."""
    from rbench.scenarios.quiver import QuiverOptions

    v = {k: DEFAULTS[k] if getattr(args, k, None) is None else getattr(args, k) for k in DEFAULTS}
    if v["body_size"] < 0:
        raise ConfigError("--body-size: expected bytes >= 0")
    count = v["count"] if v["count"] is not None else (0 if v["duration"] else 1_000_000)
    given = getattr(args, "in_flight", None)
    in_flight = IN_FLIGHT_DEFAULT if given is None else given
    return QuiverOptions(uri=uri, queue=queue, count=count, duration=v["duration"], body_size=v["body_size"],
                         credit=v["credit"], durable=v["durable"], settlement=v["settlement"], rate=v["rate"],
                         warmup=v["warmup"], window=v["window"], in_flight=in_flight,
                         in_flight_policy=getattr(args, "in_flight_policy", None) or "adaptive",
                         keep_queue=keep_queue)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("url", help="amqp://user:pass@host:port/vhost[?address=v2]; or a workload YAML file, run through the "
                  "Spark job with driver amqp10")
    a("--queue", default="", help="queue to use (declared over AMQP 0.9.1 if missing: the 3.x plugin cannot declare; "
                                  "deleted afterwards if this run declared it, as rbench run does); "
                                  "default: a fresh one, deleted afterwards")
    a("--keep-queue", action="store_true", help="leave the queue this run declared (rbench run's queues.keep)")
    add_send_receive_options(parser)
    a("--output", type=Path, default=None, metavar="DIR", help="write summary.json and samples.parquet here "
                                                               "(with a workload: the results root)")
    a("--master", default=None, help="with a workload file: the Spark master (default local[*])")


def run(args: argparse.Namespace) -> int:
    from rbench.scenarios.quiver import run as run_scenario
    from rbench.scenarios.quiver_output import write_outputs

    if args.url.endswith((".yaml", ".yml")):
        return _workload(args)
    opts = quiver_options(args, args.url, args.queue, args.keep_queue)
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
