"""A task's connection figures as run.json keeps them (task_results[].connect), and their sum per cluster.

The executor returns each connection's connect latency (TCP connect + protocol handshake to the open
reply: AMQP 0.9.1 connection.open-ok) and each idle connection's channel-open latency, in microseconds,
with the refusals and timeouts (rbench.runtime.connect_log). Percentiles over a cluster are taken over
every connection of every counted task, exactly (nearest rank), not merged from per-task figures.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rbench.samples.fields import Fields

CONNECT_METHOD = ("connect latency = each connection's TCP connect + protocol handshake to the open reply (AMQP 0.9.1 "
                  "connection.open-ok), measured by the task around the driver's open (fail-over included); channel = "
                  "channel.open → channel.open-ok on each idle connection; percentiles nearest-rank over every "
                  "connection of the cluster's counted tasks, reconnects included; refused/timed out: attempts that "
                  "failed (refused, reset or authentication; no answer within the connect timeout)")


@dataclass(frozen=True)
class ConnectStats:
    """What one task's connections cost to open (or a cluster's, summed)."""

    opened: int = 0
    idle: int = 0
    idle_lost: int = 0
    refused: int = 0
    timed_out: int = 0
    fd_limit: int | None = None
    connect_us: tuple[int, ...] = ()
    channel_us: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"opened": self.opened, "idle": self.idle, "idle_lost": self.idle_lost, "refused": self.refused,
                "timed_out": self.timed_out, "fd_limit": self.fd_limit, "connect_us": list(self.connect_us),
                "channel_us": list(self.channel_us)}

    @classmethod
    def from_json(cls, data: object, where: str) -> ConnectStats:
        f = Fields(data, where)
        return cls(opened=f.req_int("opened", 0), idle=f.req_int("idle", 0), idle_lost=f.req_int("idle_lost", 0),
                   refused=f.req_int("refused", 0), timed_out=f.req_int("timed_out", 0), fd_limit=f.opt_int("fd_limit"),
                   connect_us=f.ints("connect_us"), channel_us=f.ints("channel_us"))

    @staticmethod
    def total(stats: Iterable[ConnectStats]) -> ConnectStats:
        out = [s for s in stats]
        return ConnectStats(sum(s.opened for s in out), sum(s.idle for s in out), sum(s.idle_lost for s in out),
                            sum(s.refused for s in out), sum(s.timed_out for s in out),
                            min((s.fd_limit for s in out if s.fd_limit is not None), default=None),
                            tuple(v for s in out for v in s.connect_us), tuple(v for s in out for v in s.channel_us))

    def figures(self) -> dict[str, Any]:
        """The columns steps.csv and clusters.csv carry (CONNECT_COLUMNS), ms."""
        return {"connections_opened": self.opened, "idle_connections": self.idle, "connect_refused": self.refused,
                "connect_timed_out": self.timed_out,
                "connect_p50_ms": percentile_ms(self.connect_us, 0.50), "connect_p99_ms": percentile_ms(self.connect_us, 0.99),
                "connect_max_ms": percentile_ms(self.connect_us, 1.0),
                "channel_open_p50_ms": percentile_ms(self.channel_us, 0.50),
                "channel_open_p99_ms": percentile_ms(self.channel_us, 0.99),
                "channel_open_max_ms": percentile_ms(self.channel_us, 1.0)}


CONNECT_COLUMNS = ("connections_opened", "idle_connections", "connect_refused", "connect_timed_out", "connect_p50_ms",
                   "connect_p99_ms", "connect_max_ms", "channel_open_p50_ms", "channel_open_p99_ms", "channel_open_max_ms")


def percentile_ms(values_us: Sequence[int], q: float) -> float | None:
    """Nearest-rank percentile of microsecond values, in ms; None when there are none."""
    if not values_us:
        return None
    ordered = sorted(values_us)
    rank = max(1, -(-int(round(q * len(ordered) * 1e6)) // 1_000_000))
    return ordered[min(rank, len(ordered)) - 1] / 1000.0


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def summary_line(cluster: str, stats: ConnectStats) -> str:
    """One line for the end-of-run summary: what the cluster's connections cost to open, and how measured."""
    f = stats.figures()
    idle = f" ({stats.idle:,} idle, {stats.idle_lost:,} of them lost)" if stats.idle or stats.idle_lost else ""
    channel = (f"; channel open p50/p99/max {_ms(f['channel_open_p50_ms'])}/{_ms(f['channel_open_p99_ms'])}/"
               f"{_ms(f['channel_open_max_ms'])} ms" if stats.channel_us else "")
    return (f"{cluster}: connections: {stats.opened:,} opened{idle}, {stats.refused:,} refused, {stats.timed_out:,} "
            f"timed out; connect (TCP + handshake to open-ok, per connection, by the task) p50/p99/max "
            f"{_ms(f['connect_p50_ms'])}/{_ms(f['connect_p99_ms'])}/{_ms(f['connect_max_ms'])} ms{channel}")
