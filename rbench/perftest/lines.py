"""PerfTest's per-interval outputs: its CSV file (-o) and its console formats (-mf default|compact).

Fed by the driver's status-line loop (rbench.coordinator.progress) from the per-second counts and
log-bucket latency histograms every task reports (rbench.live.control.ProgressBoard), so the
CSV costs the tasks nothing. Columns, their order and the rate formatting follow
PerfTest's CsvMetricsFormatter and MetricsFormatterUtils; latencies are read from the
merged histograms (within ±6 %), and "consumer latency" is rbench's end-to-end latency
from each message's intended send time. Exact percentiles come from the Parquet samples.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TextIO

from rbench.live import histogram

QUANTILES = (0.0, 0.5, 0.75, 0.95, 0.99)       # PerfTest's min/median/75th/95th/99th


@dataclass
class Interval:
    """What all tasks of a cluster did during one reporting interval."""

    elapsed_s: float                 # seconds since the run's t0, at the interval's end
    seconds: int                     # how many wall-clock seconds it covers
    published: int = 0
    confirmed: int = 0
    nacked: int = 0
    returned: int = 0
    consumed: int = 0
    hist: dict[int, int] = field(default_factory=dict)
    confirm_hist: dict[int, int] = field(default_factory=dict)
    generator: str | None = None     # why the generator looked like the limit in this interval (self-check)

    def rate(self, count: int) -> float:
        return count / self.seconds if self.seconds else 0.0


def format_rate(rate: float) -> str:
    """PerfTest's rate formatting: 0, 0.25, 2.5, 25 (whole numbers from 10 up)."""
    if rate == 0:
        return "0"
    if rate < 1:
        return f"{rate:.2f}"
    if rate < 10:
        return f"{rate:.1f}"
    return str(int(rate))


def latency_stats(hist: dict[int, int], unit: str) -> list[int]:
    """min/median/75th/95th/99th in whole µs or ms (0 when nothing arrived, as PerfTest prints)."""
    div = 1_000 if unit == "us" else 1_000_000
    out = []
    for q in QUANTILES:
        ns = histogram.quantile_ns(hist, q)
        out.append(0 if ns is None else int(ns // div))
    return out


class PerfTestOutput:
    """Renders intervals as PerfTest does; what is shown depends on the workload like PerfTest's flags."""

    def __init__(self, test_id: str, unit: str = "us", producers: bool = True, consumers: bool = True,
                 confirm: bool = False, mandatory: bool = False) -> None:
        self.test_id = test_id
        self.unit = unit
        self.unit_label = "µs" if unit == "us" else "ms"
        self.producers, self.consumers, self.confirm, self.mandatory = producers, consumers, confirm, mandatory

    @property
    def _consumer_latency(self) -> bool:
        return self.consumers

    @property
    def _confirm_latency(self) -> bool:
        return self.producers and self.confirm

    # ---- CSV (-o) ----------------------------------------------------------------------------
    def csv_header(self) -> str:
        u = self.unit_label
        return ("id,time (s),published (msg/s),returned (msg/s),confirmed (msg/s),nacked (msg/s),received (msg/s),"
                f"min consumer latency ({u}),median consumer latency ({u}),75th p. consumer latency ({u}),"
                f"95th p. consumer latency ({u}),99th p. consumer latency ({u}),min confirm latency ({u}),"
                f"median confirm latency ({u}),75th p. confirm latency ({u}),95th p. confirm latency ({u}),"
                f"99th p. confirm latency ({u})")

    def csv_row(self, iv: Interval) -> str:
        def rate(count: int, shown: bool) -> str:
            return format_rate(iv.rate(count)) if shown else ""

        cells = [self.test_id, f"{iv.elapsed_s:.3f}", rate(iv.published, self.producers),
                 rate(iv.returned, self.producers and self.mandatory), rate(iv.confirmed, self._confirm_latency),
                 rate(iv.nacked, self._confirm_latency), rate(iv.consumed, self.consumers)]
        consumer = latency_stats(iv.hist, self.unit) if self._consumer_latency else None
        confirm = latency_stats(iv.confirm_hist, self.unit) if self._confirm_latency else None
        cells += [str(x) for x in consumer] if consumer else [""] * 5
        cells += [str(x) for x in confirm] if confirm else [""] * 5
        return ",".join(cells)

    # ---- console (-mf) -----------------------------------------------------------------------
    def _latency(self, hist: dict[int, int]) -> str:
        a, b, c, d, e = latency_stats(hist, self.unit)
        return f"{a}/{b}/{c}/{d}/{e} {self.unit_label}"

    def default_line(self, iv: Interval) -> str:
        parts = [f"id: {self.test_id}, time {iv.elapsed_s:.3f} s"]
        if self.producers:
            parts.append(f"sent: {format_rate(iv.rate(iv.published))} msg/s")
        if self.mandatory:
            parts.append(f"returned: {format_rate(iv.rate(iv.returned))} msg/s")
        if self.producers and self.confirm:
            parts.append(f"confirmed: {format_rate(iv.rate(iv.confirmed))} msg/s")
            parts.append(f"nacked: {format_rate(iv.rate(iv.nacked))} msg/s")
        if self.consumers:
            parts.append(f"received: {format_rate(iv.rate(iv.consumed))} msg/s")
        line = ", ".join(parts)
        latencies = []
        if self._consumer_latency:
            latencies.append(f"consumer latency: {self._latency(iv.hist)}")
        if self._confirm_latency:
            latencies.append(f"confirm latency: {self._latency(iv.confirm_hist)}")
        if latencies:
            line += ", min/median/75th/95th/99th " + ", ".join(latencies)
        return line

    def compact_header(self) -> str:
        cols = ["time".ljust(10)]
        if self.producers:
            cols.append("sent".rjust(13))
        if self.mandatory:
            cols.append("returned".rjust(13))
        if self.producers and self.confirm:
            cols += ["confirmed".rjust(13), "nacked".rjust(13)]
        if self.consumers:
            cols.append("received".rjust(13))
        if self._consumer_latency:
            cols.append("consumer latency".rjust(23))
        if self._confirm_latency:
            cols.append("confirm latency".rjust(23))
        return "".join(cols)

    def compact_line(self, iv: Interval) -> str:
        cols = [f"{iv.elapsed_s:.3f}s".ljust(10)]

        def rate(count: int) -> str:
            return f"{format_rate(iv.rate(count))} msg/s".rjust(13)

        if self.producers:
            cols.append(rate(iv.published))
        if self.mandatory:
            cols.append(rate(iv.returned))
        if self.producers and self.confirm:
            cols += [rate(iv.confirmed), rate(iv.nacked)]
        if self.consumers:
            cols.append(rate(iv.consumed))
        if self._consumer_latency:
            cols.append(self._latency(iv.hist).rjust(23))
        if self._confirm_latency:
            cols.append(" " + self._latency(iv.confirm_hist))
        return "".join(cols)


class CsvWriter:
    """PerfTest's CSV file: header once, one flushed row per interval (a crash keeps every row so far)."""

    def __init__(self, path: str, fmt: PerfTestOutput) -> None:
        self.path = path
        self.fmt = fmt
        self._file: TextIO = open(path, "w", encoding="utf-8", newline="")   # replaces an older file, as PerfTest
        self._file.write(fmt.csv_header() + "\n")
        self._file.flush()
        self.rows = 0

    def write(self, iv: Interval) -> None:
        self._file.write(self.fmt.csv_row(iv) + "\n")
        self._file.flush()
        self.rows += 1

    def close(self) -> None:
        self._file.close()
