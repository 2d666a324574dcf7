"""What a sweep will do, decided before anything touches the broker.

Levels follow ScalabilityTest: bindings per queue k = base^j for j < y, queues q = base^i for
i < x, keeping the triangle i + j <= cap (default the mean of x and y) so the largest queue counts
meet the smallest binding counts. Within one bindings series the queues grow level by level (a
level only adds base^i - base^(i-1) queues) and are deleted in the reverse order, so each level's
create and delete time is the marginal cost at that population. With several Spark tasks, the
queues a level adds or removes are dealt out by index (index mod tasks), so shares are disjoint.
"""
from __future__ import annotations

from dataclasses import dataclass

from rbench.config.uri import check_driver_options
from rbench.errors import ConfigError

EXCHANGE_TYPES = ("direct", "topic", "fanout")
DEFAULT_QUEUE_LIMIT = 100_000
PHASES = ("create", "route", "baseline", "delete")


@dataclass(frozen=True)
class SweepSpec:
    """The sweep's parameters, as ScalabilityTest's flags name them (plus rbench's own)."""

    uri: str = "amqp://guest:guest@127.0.0.1:5672/"
    base: int = 2
    x: int = 8                      # queue exponents 0 .. x-1
    y: int = 6                      # bindings-per-queue exponents 0 .. y-1
    cap: int | None = None          # keep levels with i + j <= cap; None = (x + y) // 2
    messages: int = 200             # n: messages per routing probe
    label: str = ""                 # the series' name in plots and tables
    exchange_type: str = "direct"
    repeat: int = 1
    tasks: int = 1
    queue_limit: int = DEFAULT_QUEUE_LIMIT
    name_prefix: str = "rbench-scal-"
    prometheus: str | None = None   # http://host:15692; None = the AMQP host's port 15692

    @property
    def effective_cap(self) -> int:
        return (self.x + self.y) // 2 if self.cap is None else self.cap


@dataclass(frozen=True)
class Level:
    """One point of the sweep: q queues, each bound with k keys."""

    i: int
    j: int
    queues: int
    bindings: int
    previous_queues: int            # the series' queue count before this level (0 for the first)

    @property
    def added(self) -> int:
        return self.queues - self.previous_queues


def validate(spec: SweepSpec) -> None:
    """One line naming the flag for every value a sweep cannot run with."""
    checks: list[tuple[bool, str]] = [
        (spec.base >= 2, f"-b/--base: expected an integer >= 2, got {spec.base}"),
        (spec.x >= 1, f"-x: expected a queue exponent >= 1, got {spec.x}"),
        (spec.y >= 1, f"-y: expected a bindings exponent >= 1, got {spec.y}"),
        (spec.cap is None or spec.cap >= 0, f"-c/--cap: expected an exponent >= 0, got {spec.cap}"),
        (spec.messages >= 1, f"-n: expected messages per routing probe >= 1, got {spec.messages}"),
        (spec.repeat >= 1, f"--repeat: expected >= 1, got {spec.repeat}"),
        (spec.tasks >= 1, f"--tasks: expected >= 1, got {spec.tasks}"),
        (spec.queue_limit >= 1, f"--queue-limit: expected >= 1, got {spec.queue_limit}"),
        (spec.exchange_type in EXCHANGE_TYPES,
         f"--exchange-type: expected one of {', '.join(EXCHANGE_TYPES)}, got {spec.exchange_type!r}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    check_driver_options(spec.uri, "amqp091")
    biggest = max(level.queues for series in series_levels(spec) for level in series)
    if biggest > spec.queue_limit:
        raise ConfigError(f"-x/-c: the sweep reaches {biggest:,} queues, above --queue-limit {spec.queue_limit:,}; "
                          "lower -x or -c, or raise the limit")


def series_levels(spec: SweepSpec) -> list[list[Level]]:
    """One list of levels per bindings count, queues growing within each list."""
    cap = spec.effective_cap
    out: list[list[Level]] = []
    for j in range(spec.y):
        series: list[Level] = []
        previous = 0
        for i in range(spec.x):
            if i + j > cap:
                break
            q = spec.base ** i
            series.append(Level(i, j, q, spec.base ** j, previous))
            previous = q
        if series:
            out.append(series)
    if not out:
        raise ConfigError(f"-c/--cap: no level has i + j <= {cap}")
    return out


def queue_name(prefix: str, bindings: int, index: int) -> str:
    return f"{prefix}k{bindings}-q{index:06d}"


def share(start: int, stop: int, task: int, tasks: int) -> range:
    """Queue indices of [start, stop) that `task` of `tasks` handles: disjoint, and together all of them."""
    first = start + (task - start) % tasks
    return range(first, stop, tasks)


def binding_keys(exchange_type: str, bindings: int) -> tuple[str, ...]:
    """The k keys every queue of a series is bound with (the same k for all queues, as ScalabilityTest)."""
    if exchange_type == "topic":
        return tuple(f"k{b}.*" for b in range(bindings))
    return tuple(f"k{b}" for b in range(bindings))


def publish_keys(exchange_type: str, bindings: int) -> tuple[str, ...]:
    """Routing keys that each match every bound queue (one per binding key)."""
    if exchange_type == "topic":
        return tuple(f"k{b}.m" for b in range(bindings))
    return tuple(f"k{b}" for b in range(bindings))


def message_share(messages: int, task: int, tasks: int) -> int:
    return messages // tasks + (1 if task < messages % tasks else 0)
