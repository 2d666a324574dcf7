"""One PerfTest option's record and the words for how rbench handles it: the type of the table in options.py.

Apart from the table so the modules that read options (grammar, mapping, values, compat) name the
type and the handling constants without the table's 400 lines of data around them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Arg = Literal["none", "one", "optional", "many"]
Handling = Literal["honoured", "differs", "no_effect", "refused", "rbench"]

HONOURED: Handling = "honoured"
DIFFERS: Handling = "differs"
NO_EFFECT: Handling = "no_effect"
REFUSED: Handling = "refused"
RBENCH: Handling = "rbench"          # rbench's own additions, not PerfTest's

# help and docs list options in these groups, in this order
GROUPS = ("general", "connection", "producers", "consumers", "queues and exchanges", "transactions", "output",
          "metrics", "TLS and authentication", "Java client tuning", "several PerfTest instances", "rbench")

# the PerfTest source the table was read from
SOURCE = ("rabbitmq-perf-test src/main/java/com/rabbitmq/perf/PerfTest.java (getOptions) and the options() of "
          "BaseMetrics, PrometheusMetrics, DatadogMetrics and JmxMetrics, PerfTest 2.x")


@dataclass(frozen=True)
class Option:
    """One PerfTest option: its names, its value, its meaning there and here."""

    short: str | None          # without the leading "-", e.g. "x", "qq"
    long: str | None           # without the leading "--", e.g. "producers"
    arg: Arg                   # none: a flag; one: one value; optional: -e; many: repeatable list (-f, -qa …)
    metavar: str               # shown in help: -x N
    perftest: str              # PerfTest's description, quoted
    handling: Handling
    rbench: str                # what rbench does: fields it sets, the difference, or the refusal reason
    group: str
    notice: str | None = None  # printed once per run when the option is given (differences that change figures)

    @property
    def key(self) -> str:
        """Stable identity: the long name, or the short one for the few without a long name."""
        return self.long or str(self.short)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (f"-{self.short}" if self.short else None, f"--{self.long}" if self.long else None) if n)

    @property
    def label(self) -> str:
        """How messages name it: -x/--producers."""
        return "/".join(self.names)

    @property
    def takes_value(self) -> bool:
        return self.arg != "none"

    def refusal(self) -> str:
        return f"{self.label}: not supported by rbench: {self.rbench}"
