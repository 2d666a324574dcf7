"""`rbench perftest …`: RabbitMQ PerfTest's flags, run as an rbench workload.

PerfTest users keep their command lines; rbench turns them into the same Workload a
YAML file would give (`--print-workload` shows it) and runs it on Spark. Semantics
follow PerfTest: `-c N` enables confirms with at most N unconfirmed messages,
`-L` is in microseconds, `-ad` defaults to true, queues are durable when `-f
persistent` is given, and `-qa` keys auto-delete/durable/exclusive are queue
properties rather than x-arguments. Quorum and stream queues are always durable.
"""
from __future__ import annotations

import argparse
from typing import Any

import yaml

from rbench.commands.run import add_run_options, execute
from rbench.config.durations import parse_seconds
from rbench.config.load import workload_from_dict
from rbench.errors import ConfigError, mask_uri

HELP = "Run a workload given as RabbitMQ PerfTest flags (-x -y -r -s -z -q -c …)."
ADD_HELP = False          # -h is PerfTest's --uri


def _bool(flag: str) -> Any:
    def parse(value: str) -> bool:
        low = value.lower()
        if low in ("true", "yes", "1"):
            return True
        if low in ("false", "no", "0"):
            return False
        raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")
    parse.__name__ = f"{flag} boolean"
    return parse


def _rate_seconds(value: str) -> tuple[float, float]:
    rate, sep, seconds = value.partition(":")
    try:
        if not sep:
            raise ValueError
        return float(rate), parse_seconds(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected RATE:SECONDS, e.g. 100:60, got {value!r}") from None


def _steps(value: str) -> list[tuple[float, float]]:
    return [_rate_seconds(v) for v in value.split(",") if v]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("--help", action="help", help="show this help and exit")
    a("-h", "--uri", default=None, help="AMQP URI (default amqp://guest:guest@127.0.0.1:5672/)")
    a("-H", "--uris", default=None, help="comma-separated AMQP URIs (fail-over order)")
    a("-x", "--producers", type=int, default=1)
    a("-y", "--consumers", type=int, default=1)
    a("-u", "--queue", default=None, help="queue name")
    a("-z", "--time", type=float, default=None, help="run time in seconds")
    a("-C", "--pmessages", type=int, default=None, help="messages per producer")
    a("-D", "--cmessages", type=int, default=None, help="messages per consumer")
    a("-s", "--size", type=int, default=12, help="message size in bytes (rbench sends at least its 24-byte stamp)")
    a("-f", "--flag", action="append", default=[], choices=["persistent", "mandatory"], help="message flag (repeatable)")
    a("-q", "--qos", type=int, default=0, help="consumer prefetch count")
    a("-c", "--confirm", type=int, default=-1, help="max unconfirmed publishes; enables confirms")
    a("-a", "--autoack", action="store_true")
    a("-ct", "--confirm-timeout", type=float, default=30.0, help="seconds; -1 waits until the drain timeout")
    a("-ad", "--auto-delete", type=_bool("-ad"), default=True, help="auto-delete queues (true|false)")
    a("-qa", "--queue-args", default="", help="queue arguments k=v,k=v (x-queue-type=quorum, …)")
    a("-r", "--rate", type=float, default=None, help="msg/s per producer (default unlimited)")
    a("-L", "--consumer-latency", type=int, default=0, help="consumer processing delay in microseconds")
    a("-e", "--exchange", default="direct")
    a("-t", "--type", default="direct", choices=["direct", "fanout", "topic", "headers"])
    a("-k", "--routing-key", default=None)
    a("-p", "--predeclared", action="store_true", help="queues exist: do not declare")
    a("-A", "--multi-ack-every", type=int, default=0)
    a("-V", "--variable-rate", action="append", type=_rate_seconds, default=[], metavar="RATE:SECONDS")
    a("--queue-pattern", "-qp", default=None)
    a("--queue-pattern-from", "-qpf", type=int, default=1)
    a("--queue-pattern-to", "-qpt", type=int, default=None)
    a("--producer-random-start-delay", "-prsd", type=float, default=0.0, help="seconds")
    # rbench's own additions
    a("--rate-steps", type=_steps, default=None, metavar="RATE:SECONDS,…", help="increasing-intensity steps")
    a("--warmup", type=float, default=0.0, help="seconds excluded from each step's statistics")
    a("--name", default="perftest", help="workload name")
    a("--cluster-name", default="default")
    a("--nodes", type=int, default=1)
    a("--instance-type", default="local")
    a("--volume-type", default="local")
    a("--driver", default=None, choices=["amqp091", "aiopika", "stream"])
    a("--print-workload", action="store_true", help="print the equivalent workload YAML and exit")
    add_run_options(parser)


def _queue_args(text: str) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"-qa: expected key=value pairs separated by commas, got {item!r}")
        args[key] = _scalar(value)
    return args


def _scalar(value: str) -> Any:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value


def workload_dict(args: argparse.Namespace) -> dict[str, Any]:
    """The workload these PerfTest flags describe, as the YAML mapping would be."""
    uris = [u.strip() for u in args.uris.split(",")] if args.uris else [args.uri or "amqp://guest:guest@127.0.0.1:5672/"]
    qa = _queue_args(args.queue_args)
    qtype = str(qa.pop("x-queue-type", "classic"))
    persistent = "persistent" in args.flag
    durable = bool(qa.pop("durable", persistent))
    auto_delete = bool(qa.pop("auto-delete", args.auto_delete))
    exclusive = bool(qa.pop("exclusive", False))
    if qtype in ("quorum", "stream"):      # the broker refuses anything else for these types
        durable, auto_delete, exclusive = True, False, False
    queues: dict[str, Any] = {"type": qtype, "durable": durable, "auto_delete": auto_delete, "exclusive": exclusive,
                              "predeclared": args.predeclared, "arguments": qa}
    if args.queue_pattern:
        queues.update(pattern=args.queue_pattern, **{"from": args.queue_pattern_from},
                      to=args.queue_pattern_to if args.queue_pattern_to is not None else args.queue_pattern_from)
    else:
        queues["name"] = args.queue or "perf-test"
    w: dict[str, Any] = {
        "name": args.name,
        "clusters": [{"name": args.cluster_name, "uris": uris, "nodes": args.nodes,
                      "instance_type": args.instance_type, "volume_type": args.volume_type}],
        "producers": args.producers, "consumers": args.consumers, "size": args.size, "queues": queues,
        "exchange": {"name": args.exchange, "type": args.type},
        "publisher": {"confirm": args.confirm > 0, "confirm_window": max(args.confirm, 0),
                      "confirm_timeout": None if args.confirm_timeout < 0 else args.confirm_timeout,
                      "mandatory": "mandatory" in args.flag, "persistent": persistent,
                      "random_start_delay": args.producer_random_start_delay},
        "consumer": {"prefetch": args.qos, "auto_ack": args.autoack, "multi_ack_every": args.multi_ack_every,
                     "processing_delay": args.consumer_latency / 1e6},
        "warmup": args.warmup,
    }
    if args.routing_key is not None:
        w["routing_key"] = args.routing_key
    if args.driver:
        w["driver"] = args.driver
    if args.pmessages:
        w["publisher"]["message_count"] = args.pmessages
    if args.cmessages:
        w["consumer"]["message_count"] = args.cmessages
    if args.rate is not None and args.rate > 0:
        w["rate"] = args.rate
    if args.rate_steps:
        w["rate_steps"] = [{"rate": r, "duration": d} for r, d in args.rate_steps]
    elif args.variable_rate:
        w["variable_rate"] = [{"rate": r, "duration": d} for r, d in args.variable_rate]
    if args.time is not None and not args.rate_steps:
        w["duration"] = args.time
    if "duration" not in w and "rate_steps" not in w and not args.pmessages:
        raise ConfigError("-z: expected a run time (-z SECONDS), --rate-steps or a message count (-C N)")
    return w


def run(args: argparse.Namespace) -> int:
    data = workload_dict(args)
    workload = workload_from_dict(data, source="perftest flags")
    if args.print_workload:
        shown = workload.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        for cluster in shown["clusters"]:
            cluster["uris"] = [mask_uri(u) for u in cluster["uris"]]
        print(yaml.safe_dump(shown, sort_keys=False))
        return 0
    return execute(workload, args)
