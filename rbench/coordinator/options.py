"""How to run a workload, apart from the workload itself, and the checks those options need before Spark.

One holder for the run options so that every command that ends in a run (run, perftest,
nightly, amqp10 with a workload file) gets the same defaults as `rbench run`'s command line.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import socket
from dataclasses import dataclass, field

from rbench.config.model import Workload
from rbench.errors import ConfigError


@dataclass(frozen=True)
class RunOptions:
    """`rbench run`'s options; ``costs`` is the price table of the reduce (`rbench nightly --costs`)."""

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
    costs: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})

    def spark_conf(self) -> dict[str, str]:
        """The Spark configuration these options ask for: every --conf KEY=VALUE, then --stage-attempts."""
        from rbench.spark import STAGE_ATTEMPTS_KEY

        conf = spark_conf(self.conf)
        if self.stage_attempts is not None:
            conf[STAGE_ATTEMPTS_KEY] = str(self.stage_attempts)
        return conf

    def linger_s(self) -> float:
        """--metrics-linger in seconds; a bad duration is a ConfigError naming the flag."""
        from rbench.config.durations import parse_seconds

        try:
            return parse_seconds(self.metrics_linger)
        except ValueError as exc:
            raise ConfigError(f"--metrics-linger: {exc}") from None


def spark_conf(items: list[str]) -> dict[str, str]:
    """Every ``--conf KEY=VALUE`` (spark-submit's flag) as a dict; one without ``=`` is a one-line ConfigError."""
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--conf: expected KEY=VALUE, got {item!r}")
        conf[key] = value
    return conf


def default_master() -> str | None:
    """local[*] unless spark-submit already chose a master."""
    # under spark-submit the JVM gateway already exists and carries the chosen master
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[*]"


def local_slots(master: str | None) -> int:
    """Task slots of a local[N] / local[*] master."""
    inside = (master or "local[*]").partition("[")[2].rstrip("]").split(",")[0]
    return int(inside) if inside.isdigit() else (os.cpu_count() or 1)


def check_ports(workload: Workload, options: RunOptions, master: str | None) -> None:
    """The fixed ports the run will listen on are free, checked before any JVM starts.

    Only a local master's executors listen on this host, so only then are the tasks' ports
    (metrics_port + i) checked here; the run's own /metrics is always on this host."""
    if master is None or master.startswith("local"):
        from rbench.plan import default_task_count

        n = options.tasks or (workload.tasks if isinstance(workload.tasks, int) else
                              default_task_count(workload, local_slots(master)))
        if workload.metrics_port:
            ports_free("metrics_port", workload.metrics_port, n, "task i listens on metrics_port + i")
    if options.metrics_port:
        ports_free("--metrics-port", options.metrics_port, 1, "the run's /metrics")


def ports_free(name: str, first: int, count: int, why: str) -> None:
    """ConfigError naming ``name`` when a fixed port this run needs is taken on this host.

    A fixed port is a promise to whoever scrapes it: a taken one is an error before any JVM
    starts, never a quiet move to another port (issue 11)."""
    for number in range(first, first + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # as the metrics server does
            try:
                s.bind(("0.0.0.0", number))
            except OSError as exc:
                which = f"port {number}" if count == 1 else f"port {number} ({why}, {count} tasks)"
                raise ConfigError(f"{name}: {which} is already in use on this host ({exc.strerror}); "
                                  f"choose a free port, or 0 for any free port") from None
