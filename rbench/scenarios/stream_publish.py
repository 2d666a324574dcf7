"""Scenario ``stream-publish``: RbFly-style publishing benchmark for RabbitMQ Streams.

Two variants, each repeated ``rounds`` times on a fresh publisher:

* ``single``: N messages one at a time, each confirmed before the next is sent
  (measures the confirm round trip plus per-message client cost);
* ``batch``: M messages in batches of B, each batch confirmed before the next
  (measures client throughput: encoding, framing and confirm handling).

Messages are 10 bytes (``'{:010d}'.format(n)``), AMQP 1.0 ``data`` sections or raw
binary. Per round we record wall time and this process's CPU (getrusage user+sys),
so the report gives msgs/s and client CPU per message; medians over rounds are what
the CLI prints, and a box plot shows the spread (one box per variant). With a rate cap
(``--rate``) message n is not sent before n / rate seconds into its round (a batch goes
out at its first message's due time), so a round can never beat the cap by more than one
batch: the rates are then "at most the cap", not a publisher's best.
It goes through the same ``StreamDriver``/``StreamPublisher`` the runtime uses, so
what it measures is what a workload gets.
"""
from __future__ import annotations

import asyncio
import resource
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from rbench.config.types import ClusterTarget, PublisherSpec, QueueDecl
from rbench.drivers.stream import StreamDriver
from rbench.drivers.stream_publisher import StreamPublisher
from rbench.errors import BrokerError, ConfigError

Format = Literal["amqp", "binary"]
STALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Variant:
    """One way of publishing: ``batch`` messages per confirm round trip."""

    name: str
    messages: int
    batch: int

    def __post_init__(self) -> None:
        if self.messages <= 0 or self.batch <= 0:
            raise ConfigError(f"stream-publish {self.name}: messages and batch size must be positive")


@dataclass(frozen=True)
class RoundResult:
    variant: str
    round: int
    messages: int
    seconds: float
    cpu_seconds: float

    @property
    def rate(self) -> float:
        """Confirmed messages per second of wall time."""
        return self.messages / self.seconds if self.seconds > 0 else float("inf")

    @property
    def cpu_us_per_msg(self) -> float:
        return self.cpu_seconds / self.messages * 1e6


@dataclass
class Report:
    """Every round of every variant, plus the medians the CLI prints."""

    message_format: str
    rounds: list[RoundResult] = field(default_factory=list)
    rate_cap: float | None = None          # msg/s; None: as fast as confirms allow

    def variants(self) -> list[str]:
        return list(dict.fromkeys(r.variant for r in self.rounds))

    def median_rate(self, variant: str) -> float:
        return statistics.median(r.rate for r in self.rounds if r.variant == variant)

    def median_cpu_us(self, variant: str) -> float:
        return statistics.median(r.cpu_us_per_msg for r in self.rounds if r.variant == variant)

    def as_dict(self) -> dict[str, object]:
        return {
            "message_format": self.message_format,
            "rate_cap": self.rate_cap,
            "rounds": [asdict(r) | {"rate": r.rate, "cpu_us_per_msg": r.cpu_us_per_msg} for r in self.rounds],
            "medians": {v: {"rate": self.median_rate(v), "cpu_us_per_msg": self.median_cpu_us(v)}
                        for v in self.variants()},
        }

    def table(self) -> str:
        lines = [f"{'variant':<8} {'rounds':>6} {'median msg/s':>13} {'min':>10} {'max':>10} {'CPU µs/msg':>11}"]
        if self.rate_cap is not None:
            lines.insert(0, f"rates capped at {self.rate_cap:,.0f} msg/s (message n sent no earlier than n / rate s into "
                            f"its round); msg/s = confirmed messages / the round's wall time")
        for v in self.variants():
            rates = [r.rate for r in self.rounds if r.variant == v]
            lines.append(f"{v:<8} {len(rates):>6} {self.median_rate(v):>13,.0f} {min(rates):>10,.0f} "
                         f"{max(rates):>10,.0f} {self.median_cpu_us(v):>11.2f}")
        return "\n".join(lines)


class CountingSink:
    """PublishSink that only counts: the benchmark must not measure a recorder."""

    __slots__ = ("acked", "nacked")

    def __init__(self) -> None:
        self.acked = 0
        self.nacked = 0

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        if acked:
            self.acked += 1
        else:
            self.nacked += 1

    def on_return(self, body: bytes | memoryview, t_ns: int) -> None:
        pass


async def publish_messages(pub: StreamPublisher, count: int, batch: int, rate: float | None = None,
                           t0: float | None = None) -> None:
    """Publish messages 0..count-1 (``message(n)``), waiting for every confirm of each
    ``batch`` before the next, exactly as a workload's publisher waits (``drain``); with
    ``rate``, each batch also waits for its first message's due time (t0 + n / rate, on
    ``time.perf_counter``, the clock that times the round).

    Why not pace on ``loop.time()``: uvloop's clock is libuv's, in whole milliseconds and
    read once per loop turn, and its timers fire on that clock; a batch could go out up
    to a millisecond before its due time by the round's own clock (seen in CI: message 39
    of 40 at 200 msg/s sent 0.25 ms early). The cap promises "no earlier than", so the
    wait is re-checked on the precise clock after each sleep.

    Why not send the next batch straight from the confirm callback: it was tried. It
    takes ~10 µs of Python off each round trip, yet on this 2-vCPU machine it made the
    single-message variant ~12 % *slower* (the broker answers later when the next
    publish lands within ~15 µs of its confirm; see docs/streams.md), and it measured
    something no workload does.
    """
    fmt = "{:010d}".format
    publish = pub.publish
    drain = pub.drain
    now = time.perf_counter
    if t0 is None:
        t0 = now()
    for start in range(0, count, batch):
        if rate is not None:
            due = t0 + start / rate
            while (wait := due - now()) > 0:
                await asyncio.sleep(wait)
        for n in range(start, min(start + batch, count)):
            publish(fmt(n).encode(), n)
        if await drain(STALL_TIMEOUT_S):
            if pub.error is not None:
                raise pub.error
            raise BrokerError(f"stream-publish: messages from {start} not confirmed within {STALL_TIMEOUT_S:.0f} s")


def message(n: int) -> bytes:
    """The n-th 10-byte message, as in RbFly's performance report."""
    return f"{n:010d}".encode()


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def open_publisher(driver: StreamDriver, stream: str, fmt: Format) -> tuple[StreamPublisher, CountingSink]:
    """A fresh confirmed publisher and the sink that counts its confirms."""
    sink = CountingSink()
    pub = await driver.publisher(PublisherSpec(0, stream, confirm=True, message_format=fmt), sink)
    assert isinstance(pub, StreamPublisher)          # one stream, not a super stream
    return pub, sink


async def publish_round(driver: StreamDriver, stream: str, variant: Variant, fmt: Format, index: int,
                        rate: float | None = None) -> RoundResult:
    """One timed round on a fresh publisher; connection set-up is outside the timing."""
    pub, sink = await open_publisher(driver, stream, fmt)
    try:
        c0, t0 = cpu_seconds(), time.perf_counter()
        await publish_messages(pub, variant.messages, variant.batch, rate, t0)
        t1, c1 = time.perf_counter(), cpu_seconds()
    finally:
        await pub.aclose()
    if sink.acked != variant.messages:
        raise BrokerError(f"stream-publish {variant.name}: {sink.acked} of {variant.messages} confirmed "
                          f"({sink.nacked} refused)")
    return RoundResult(variant.name, index, variant.messages, t1 - t0, c1 - c0)


async def run_async(target: ClusterTarget, variants: list[Variant], rounds: int, fmt: Format,
                    stream: str | None = None, keep_stream: bool = False,
                    progress: Callable[[RoundResult], None] | None = None, rate: float | None = None) -> Report:
    """Create the stream (unique name unless given), run the rounds interleaved, delete it."""
    if rounds <= 0:
        raise ConfigError("stream-publish: --rounds must be positive")
    if rate is not None and not rate > 0:
        raise ConfigError(f"stream-publish: --rate: expected a positive rate in msg/s, got {rate:g}")
    name = stream or f"rbench-stream-publish-{uuid.uuid4().hex[:8]}"
    driver = StreamDriver()
    await driver.open(target)
    report = Report(fmt, rate_cap=rate)
    created = False
    try:
        created = await driver.create_stream(QueueDecl(name, arguments=(("x-queue-type", "stream"),)))
        for i in range(rounds):
            for v in variants:       # interleaved, so broker drift hits every variant alike
                result = await publish_round(driver, name, v, fmt, i, rate)
                report.rounds.append(result)
                if progress is not None:
                    progress(result)
    finally:
        try:
            if created and not keep_stream:
                await driver.delete_streams([name])
        finally:
            await driver.aclose()
    return report


def run(target: ClusterTarget, variants: list[Variant], rounds: int, fmt: Format, stream: str | None = None,
        keep_stream: bool = False, progress: Callable[[RoundResult], None] | None = None,
        rate: float | None = None) -> Report:
    """Synchronous entry point on uvloop (the loop the runtime uses)."""
    import uvloop

    return uvloop.run(run_async(target, variants, rounds, fmt, stream, keep_stream, progress, rate))


def box_plot(report: Report, path: Path, title: str = "rbench stream-publish") -> Path:
    """One box of msgs/s per variant (rounds as points), saved as PNG (Agg: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = report.variants()
    fig, axes = plt.subplots(1, len(variants), figsize=(4.2 * len(variants), 4.2), squeeze=False)
    for ax, v in zip(axes[0], variants):
        rates = [r.rate for r in report.rounds if r.variant == v]
        ax.boxplot(rates, widths=0.5)
        ax.scatter([1] * len(rates), rates, s=12, alpha=0.6, color="tab:blue")
        cap = f" (cap {report.rate_cap:,.0f})" if report.rate_cap is not None else ""
        ax.set_title(f"{v}: median {report.median_rate(v):,.0f} msg/s{cap}\n"
                     f"CPU {report.median_cpu_us(v):.2f} µs/msg, {len(rates)} rounds", fontsize=9)
        ax.set_ylabel("messages per second")
        ax.set_xticks([1], [f"{v} ({report.message_format})"])
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
