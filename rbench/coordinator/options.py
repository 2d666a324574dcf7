"""How to run a workload, apart from the workload itself, and the checks those options need before Spark.

One holder for the run options so that every command that ends in a run (run, perftest,
nightly, amqp10 with a workload file) gets the same defaults as `rbench run`'s command line.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import ssl
from dataclasses import dataclass, field

from rbench.config.model import Workload
from rbench.config.types import MetricsAccess
from rbench.errors import ConfigError

METRICS_PASSWORD_ENV = "RBENCH_METRICS_PASSWORD"


@dataclass(frozen=True)
class Listening:
    """Where the run's listeners bind and what TLS they serve (docs/cluster.md, "Security"; docs/metrics.md).

    The control channel always binds spark.driver.host and always authenticates its peers; these add
    TLS to it, and choose the address and TLS of the /metrics servers."""

    metrics_bind: str = "0.0.0.0"            # the run's /metrics and every task's
    metrics_tls_cert: str | None = None      # the run's /metrics over HTTPS (the coordinator's host)
    metrics_tls_key: str | None = None
    control_tls_cert: str | None = None      # the control channel over TLS, this certificate pinned in the task plans
    control_tls_key: str | None = None
    metrics_user: str | None = None          # basic auth on every /metrics; the password from METRICS_PASSWORD_ENV

    def __post_init__(self) -> None:
        for what in ("metrics", "control"):
            cert, key = getattr(self, f"{what}_tls_cert"), getattr(self, f"{what}_tls_key")
            if (cert is None) != (key is None):
                given, missing = ("cert", "key") if key is None else ("key", "cert")
                raise ConfigError(f"--{what}-tls-{missing}: expected with --{what}-tls-{given} (TLS needs both files)")

    def control_tls(self) -> tuple[ssl.SSLContext, bytes] | None:
        """The control channel's TLS context and the certificate's SHA-256 to pin; ConfigError naming a bad file."""
        from rbench.live.control.tls import server_context

        if self.control_tls_cert is None or self.control_tls_key is None:
            return None
        return server_context(self.control_tls_cert, self.control_tls_key)

    def check(self) -> None:
        """Every TLS file can be read and its key goes with its certificate: before any JVM starts."""
        from rbench.live.control.tls import server_context

        self.control_tls()
        if self.metrics_tls_cert is not None and self.metrics_tls_key is not None:
            server_context(self.metrics_tls_cert, self.metrics_tls_key, "--metrics-tls")
        self.metrics_access()

    def metrics_access(self) -> MetricsAccess:
        """Who may read the run's and the tasks' /metrics: the bind address, the basic-auth user with the SHA-256
        of the password in ``$RBENCH_METRICS_PASSWORD`` (never a flag: a flag shows in ps and shell history),
        and the TLS certificate and key as PEM text for the executors."""
        from rbench.live.metrics_http import password_digest

        digest = None
        if self.metrics_user is not None:
            password = os.environ.get(METRICS_PASSWORD_ENV)
            if not password:
                raise ConfigError(f"--metrics-user: expected the password in the environment variable "
                                  f"{METRICS_PASSWORD_ENV} (not on the command line)")
            if not self.metrics_user or ":" in self.metrics_user:
                raise ConfigError(f"--metrics-user: expected a user name without ':', got {self.metrics_user!r}")
            digest = password_digest(password)
        cert = key = None
        if self.metrics_tls_cert is not None and self.metrics_tls_key is not None:
            cert, key = _read(self.metrics_tls_cert, "--metrics-tls-cert"), _read(self.metrics_tls_key, "--metrics-tls-key")
        return MetricsAccess(self.metrics_bind, self.metrics_user, digest, cert, key)


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"{flag}: cannot read {path} ({exc.strerror})") from None


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
    metrics_bind: str = "0.0.0.0"
    metrics_tls_cert: str | None = None
    metrics_tls_key: str | None = None
    control_tls_cert: str | None = None
    control_tls_key: str | None = None
    metrics_user: str | None = None

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

    def listening(self) -> Listening:
        """The listeners' options; ConfigError when a TLS certificate comes without its key or the other way."""
        return Listening(self.metrics_bind, self.metrics_tls_cert, self.metrics_tls_key, self.control_tls_cert,
                         self.control_tls_key, self.metrics_user)

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
        if workload.idle_connections or workload.connections not in (None, "per_task"):
            check_fd_room(workload, n)
    if options.metrics_port:
        ports_free("--metrics-port", options.metrics_port, 1, "the run's /metrics")


def check_fd_room(workload: Workload, n_tasks: int) -> None:
    """A local run's tasks hold their connections on this host: more than its hard RLIMIT_NOFILE allows is one
    line naming ``ulimit -n`` before any JVM starts (each task raises its soft limit itself)."""
    from rbench.config.fds import fd_problem
    from rbench.plan import plan

    for cluster in workload.clusters:
        for task in plan(workload, cluster.name, n_tasks, "check", "/nonexistent"):
            problem = fd_problem(task)
            if problem is not None:
                raise ConfigError(problem)


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
