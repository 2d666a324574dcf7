"""The driver's status line, once a second, in the spirit of PerfTest's.

Tasks report what they did in each wall-clock second (their ticks are aligned to
second boundaries); a line shows the last complete second, so rates are counts per
second, not deltas divided by a jittery interval. Latencies are read from merged log-bucket histograms of the current step so far
(within ±6 %). Exact figures come from the reduce job.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from rbench.control import ProgressBoard
from rbench.conventions import shown_step
from rbench.runtime import histogram


def format_latency(ns: float | None) -> str:
    if ns is None:
        return "-"
    if ns < 1e6:
        return f"{ns / 1e3:.0f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.2f} s"


class ProgressPrinter:
    """Background thread printing one line per second for the cluster being run."""

    def __init__(self, board: ProgressBoard, steps: list[tuple[float | None, float]], producers: int,
                 out: TextIO = sys.stdout, interval_s: float = 1.0) -> None:
        self.board = board
        self.steps = steps                # (rate per producer, duration)
        self.producers = producers
        self.out = out
        self.interval_s = interval_s
        self.cluster = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rbench-progress", daemon=True)
        self._shown_endpoints: set[str] = set()

    def start(self, cluster: str) -> None:
        self.cluster = cluster
        if not self._thread.is_alive():
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s - (time.time() % 1.0) + 0.3):   # 0.3 s after each second
            for endpoint in sorted(set(self.board.metrics_endpoints.values()) - self._shown_endpoints):
                print(f"metrics: {endpoint}", file=self.out, flush=True)
                self._shown_endpoints.add(endpoint)
            line = self.line()
            if line:
                print(line, file=self.out, flush=True)

    def line(self) -> str | None:
        cluster = self.cluster
        w = self.board.take_second(cluster, int(time.time()) - 1)
        t0 = self.board.t0_ns.get(cluster)
        if t0 is None:
            return f"{cluster}: connecting and declaring ({len(self.board.tasks_seen.get(cluster, ()))} task(s) ready)"
        step = self.board.current_step.get(cluster, 0)
        rate, _ = self.steps[min(step, len(self.steps) - 1)]
        target = "unlimited" if rate is None else f"{rate * self.producers:,.0f} msg/s"
        so_far = self.board.step(cluster, step)
        t = max(0, int(time.time()) - t0 // 1_000_000_000)
        return (f"{cluster} step {shown_step(step)}/{len(self.steps)} target {target} | t {t:4d} s | "
                f"sent {w.published:9,}/s  confirmed {w.confirmed:9,}/s  received {w.consumed:9,}/s | "
                f"e2e p50 {format_latency(histogram.quantile_ns(so_far.hist, 0.5))}  "
                f"p99 {format_latency(histogram.quantile_ns(so_far.hist, 0.99))}"
                + (f" | nacked {w.nacked} returned {w.returned}" if w.nacked or w.returned else ""))
