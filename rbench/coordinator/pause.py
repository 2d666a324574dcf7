"""consumer.pause: stop every consumer at a point of the run and resume later (docs/broker.md).

The backlog build-up and drain scenario: consumers stop ``at`` seconds after t0; the backlog grows
at the publish rate; they resume once the workload's queues hold ``until_backlog`` messages (the
broker's depth as the sampler last read it, or the client's counts when the broker cannot be read)
or after ``for`` seconds. The coordinator decides and tells the tasks over the control channel;
run.json records when each phase began, and the reduce measures the phases from there.
"""
from __future__ import annotations

import threading
import time
from typing import TextIO

from rbench.config.model import Pause
from rbench.coordinator.broker import BrokerSampler
from rbench.live.control import ControlServer
from rbench.samples.record import PausePhase, PauseRecord

POLL_S = 0.1


class PauseController:
    """One cluster's pause and resume, on a thread from start() to stop()."""

    def __init__(self, cluster: str, pause: Pause, control: ControlServer, sampler: BrokerSampler | None,
                 copies: float, steps: int, out: TextIO | None) -> None:
        self.cluster, self.pause, self.control, self.sampler = cluster, pause, control, sampler
        self.copies, self.steps, self.out = copies, steps, out
        self.phases: list[PausePhase] = []
        self.drained_ns: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rbench-pause-{cluster}", daemon=True)

    def start(self) -> PauseController:
        self._thread.start()
        return self

    def stop(self) -> PauseRecord:
        self._stop.set()
        self._thread.join(5)
        if self.control.paused:          # the stage ended while paused: later stages start consuming
            self.control.pause_consumers(False)
        return self.record()

    def record(self) -> PauseRecord:
        """What run.json keeps under the cluster's ``pause``."""
        return PauseRecord(at_s=self.pause.at, until_backlog=self.pause.until_backlog, for_s=self.pause.for_,
                           drained_below=self.pause.drained_below, copies_per_message=self.copies,
                           phases=tuple(self.phases), drained_seen_ns=self.drained_ns)

    def backlog(self) -> tuple[int, str]:
        """Messages waiting in the workload's queues now, and where the figure came from."""
        if self.sampler is not None:
            latest = self.sampler.backlog()
            if latest is not None and time.time_ns() - latest[0] < 3 * self.sampler.cfg.interval * 1e9:
                return latest[1], "broker"
        board = self.control.board
        published = consumed = 0
        for s in range(self.steps):
            p = board.step(self.cluster, s)
            published += p.published - p.returned
            consumed += p.consumed
        return max(0, int(round(published * self.copies)) - consumed), "client counts"

    def _wait(self, seconds: float) -> bool:
        """Sleep; True when stop() was called meanwhile."""
        return self._stop.wait(max(0.0, seconds))

    def _run(self) -> None:
        while self.cluster not in self.control.board.t0_ns:
            if self._wait(POLL_S):
                return
        t0 = self.control.board.t0_ns[self.cluster]
        self.phases.append(PausePhase("steady", t0))
        if self._wait((t0 + self.pause.at * 1e9 - time.time_ns()) / 1e9):
            return
        self.control.pause_consumers(True)
        depth, source = self.backlog()
        self.phases.append(PausePhase("build-up", time.time_ns(), depth, source))
        print(f"rbench: cluster {self.cluster}: consumers paused (backlog {depth:,}, {source})", file=self.out, flush=True)
        if self.pause.for_ is not None:
            if self._wait(self.pause.for_):
                return
        else:
            assert self.pause.until_backlog is not None
            while True:
                depth, source = self.backlog()
                if depth >= self.pause.until_backlog:
                    break
                if self._wait(POLL_S):
                    return
        self.control.pause_consumers(False)
        depth, source = self.backlog()
        self.phases.append(PausePhase("drain", time.time_ns(), depth, source))
        print(f"rbench: cluster {self.cluster}: consumers resumed (backlog {depth:,}, {source})", file=self.out, flush=True)
        resumed = time.time_ns()
        while not self._wait(POLL_S):
            depth, source = self.backlog()
            if depth <= self.pause.drained_below and (source != "broker" or self._fresh_since(resumed)):
                self.drained_ns = time.time_ns()
                print(f"rbench: cluster {self.cluster}: queues drained {(self.drained_ns - resumed) / 1e9:.1f} s after "
                      f"resuming ({source})", file=self.out, flush=True)
                return

    def _fresh_since(self, t_ns: int) -> bool:
        latest = self.sampler.backlog() if self.sampler is not None else None
        return latest is not None and latest[0] > t_ns
