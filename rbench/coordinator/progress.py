"""The driver's status line, once per interval, in the spirit of PerfTest's (or in its exact formats).

Tasks report what they did in each wall-clock second (their ticks are aligned to
second boundaries); the loop takes each complete second once, so rates are counts per
second, not deltas divided by a jittery interval. An interval of N seconds (PerfTest -i)
sums N such seconds. Latencies are read from merged log-bucket histograms (within ±6 %);
exact figures come from the reduce.

Styles: rbench's line (step, target, rates, e2e p50/p99 of the step so far), or
PerfTest's default/compact lines (-mf). The PerfTest CSV (-o) gets one row per interval
whatever the style, also with --quiet; its rows stop at the planned end of the run (the
drain that follows is not part of PerfTest's time line).
"""
from __future__ import annotations

import threading
import time
from typing import TextIO

from rbench.config.types import RunPlan
from rbench.live import histogram
from rbench.live.control import ProgressBoard
from rbench.perftest.lines import CsvWriter, Interval, PerfTestOutput
from rbench.samples.conventions import shown_step


def format_latency(ns: float | None) -> str:
    if ns is None:
        return "-"
    if ns < 1e6:
        return f"{ns / 1e3:.0f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.2f} s"


class ProgressPrinter:
    """Background thread printing one line per interval for the cluster being run."""

    def __init__(self, board: ProgressBoard, plan: RunPlan,
                 out: TextIO | None = None, interval_s: float = 1.0, style: str = "rbench",
                 perftest: PerfTestOutput | None = None, csv: CsvWriter | None = None, show: bool = True) -> None:
        steps = [(s.rate, s.duration_s) for s in plan.steps]
        producers = plan.producers
        self.board = board
        self.steps = steps                # (rate per producer, duration)
        self.producers = producers
        self.out = out
        self.interval = max(1, int(round(interval_s)))
        self.style = style
        self.perftest = perftest
        self.csv = csv
        self.show = show                  # False (--quiet): no lines, the CSV is still written
        self.planned_s = sum(d for _, d in steps)
        self.cluster = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rbench-progress", daemon=True)
        self._shown_endpoints: set[str] = set()
        self._interval: Interval | None = None
        self._header_shown = False
        self._lock = threading.Lock()
        self._next_second: int | None = None        # the first second not taken yet
        self._t0: int | None = None                 # the t0 the current interval counts from

    def start(self, cluster: str) -> None:
        if self.cluster and cluster != self.cluster:
            self.finish_cluster()
        with self._lock:
            self.cluster = cluster
            self._interval = None
            self._next_second = None
        if not self._thread.is_alive():
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        self.finish_cluster()
        if self.csv is not None:
            self.csv.close()

    def finish_cluster(self) -> None:
        """Take the seconds the loop has not reached yet (the run's last, the tasks' final counts),
        and print or write a last, possibly shorter, interval."""
        if not self.cluster or self.cluster not in self.board.t0_ns:
            return
        time.sleep(0.3)                  # let the tasks' final progress lines reach the board
        with self._lock:
            lines = self._advance(int(time.time()))
            iv = self._interval
            if iv is not None and iv.seconds:
                lines += self._emit(iv, self._next_second or 0)
        for line in lines:
            self._print(line)

    def _print(self, line: str) -> None:
        if self.show:
            print(line, file=self.out, flush=True)

    def _loop(self) -> None:
        while not self._stop.wait(1.0 - (time.time() % 1.0) + 0.3):   # 0.3 s after each second
            for endpoint in sorted(set(self.board.metrics_endpoints.values()) - self._shown_endpoints):
                self._print(f"metrics: {endpoint}")
                self._shown_endpoints.add(endpoint)
            with self._lock:
                lines = self._advance(int(time.time()) - 1)
            for line in lines:
                self._print(line)

    def _advance(self, upto: int) -> list[str]:
        """Take every second not taken yet up to ``upto`` (a late wake-up loses none)."""
        start = self._next_second
        if start is None:                # first call for this cluster: from its t0's second, if seconds wait
            first = self.board.first_second(self.cluster)
            t0 = self.board.t0_ns.get(self.cluster)
            start = upto if first is None or t0 is None else min(max(first, t0 // 1_000_000_000), upto)
        lines: list[str] = []
        for second in range(start, upto + 1):
            lines += self.tick(second)
        if upto + 1 > (self._next_second or 0):
            self._next_second = upto + 1
        return lines

    def tick(self, second: int) -> list[str]:
        """Take wall-clock second ``second``; the lines to print (none until an interval is complete)."""
        cluster = self.cluster
        w = self.board.take_second(cluster, second)
        t0 = self.board.t0_ns.get(cluster)
        if t0 is None:
            if self.style != "rbench":
                return []
            return [f"{cluster}: connecting and declaring ({len(self.board.tasks_seen.get(cluster, ()))} task(s) ready)"]
        if second + 1 <= t0 / 1e9:
            return []                                  # a second before publishing started
        if t0 != self._t0:                             # Spark restarted the stage: a new load from a new t0
            self._t0, self._interval = t0, None
        iv = self._interval
        if iv is None:
            iv = self._interval = Interval(elapsed_s=0.0, seconds=0)
        iv.seconds += 1
        iv.published += w.published
        iv.confirmed += w.confirmed
        iv.nacked += w.nacked
        iv.returned += w.returned
        iv.consumed += w.consumed
        histogram.merge(iv.hist, w.hist)
        histogram.merge(iv.confirm_hist, w.confirm_hist)
        iv.generator = iv.generator or w.generator
        if iv.seconds < self.interval:
            return []
        return self._emit(iv, second + 1)

    def _emit(self, iv: Interval, end_second: int) -> list[str]:
        """The interval ending at wall-clock ``end_second``: its CSV row (inside the planned run, or later when it
        holds counts: lines a busy machine delivered late, which the board moves to the next second) and lines."""
        self._interval = None
        t0 = self.board.t0_ns.get(self.cluster)
        if t0 is None:
            return []
        iv.elapsed_s = end_second - t0 / 1e9
        counted = iv.published or iv.confirmed or iv.consumed or iv.nacked or iv.returned
        if self.csv is not None and (iv.elapsed_s - iv.seconds < self.planned_s or counted):
            self.csv.write(iv)
        return self._lines(iv, t0)

    def _lines(self, iv: Interval, t0: int) -> list[str]:
        lines: list[str] = []
        if self.style == "rbench" or self.perftest is None:
            line = self.line(iv, t0)
            return [line] if line else []
        if self.style == "compact":
            if not self._header_shown:
                lines.append(self.perftest.compact_header())
                self._header_shown = True
            lines.append(self.perftest.compact_line(iv))
        else:
            lines.append(self.perftest.default_line(iv))
        return lines

    def line(self, iv: Interval, t0: int) -> str:
        cluster = self.cluster
        step = self.board.current_step.get(cluster, 0)
        rate, _ = self.steps[min(step, len(self.steps) - 1)]
        target = "unlimited" if rate is None else f"{rate * self.producers:,.0f} msg/s"
        so_far = self.board.step(cluster, step)
        t = max(0, int(time.time()) - t0 // 1_000_000_000)
        per_s = iv.rate
        return (f"{cluster} step {shown_step(step)}/{len(self.steps)} target {target} | t {t:4d} s | "
                f"sent {per_s(iv.published):9,.0f}/s  confirmed {per_s(iv.confirmed):9,.0f}/s  "
                f"received {per_s(iv.consumed):9,.0f}/s | "
                f"e2e p50 {format_latency(histogram.quantile_ns(so_far.hist, 0.5))}  "
                f"p99 {format_latency(histogram.quantile_ns(so_far.hist, 0.99))}"
                + (f" | nacked {iv.nacked} returned {iv.returned}" if iv.nacked or iv.returned else "")
                + (f" | GENERATOR-BOUND? {iv.generator}" if iv.generator else "")
                + self.reconnecting_note())

    def reconnecting_note(self) -> str:
        """`` | reconnecting (task 3)`` while any task of the cluster is disconnected and riding through it."""
        tasks = sorted(self.board.reconnecting.get(self.cluster, ()))
        if not tasks:
            return ""
        return f" | reconnecting (task{'s' if len(tasks) > 1 else ''} {', '.join(map(str, tasks))})"
