"""What a task tells the coordinator once a second: its counts since the last line and its latency
histograms, for the current step (rbench.live.control's progress lines); and, when the workload asks,
the same figures as this task's Prometheus metrics."""
from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from rbench.config.types import TaskPlan
from rbench.errors import ConfigError
from rbench.live import histogram
from rbench.live.control.client import ControlClient
from rbench.live.control.wire import MetricsEndpoint, Progress
from rbench.runtime.recorder import Recorder
from rbench.runtime.selfcheck import SelfCheck


class TaskProgress:
    def __init__(self, plan: TaskPlan, recorder: Recorder, control: ControlClient) -> None:
        self.plan = plan
        self.recorder = recorder
        self.control = control
        self._last_counts = dict(recorder.counts)
        self.metrics: Any = None
        self.metrics_port: int | None = None     # where this task serves its Prometheus metrics, once it does
        self._metrics_server: Any = None

    def restart_counts(self) -> dict[str, int]:
        """From now on (t0) count from the recorder's counts as they are; returns them."""
        self._last_counts = dict(self.recorder.counts)
        return self._last_counts

    def current_step(self) -> int:
        elapsed_s = (time.time_ns() - self.recorder.t0_ns) / 1e9
        step = 0
        for s in self.plan.steps:
            if elapsed_s >= s.offset_s:
                step = s.index
        return step

    async def tick_every_second(self, selfcheck: SelfCheck) -> None:
        """Tick just after each wall-clock second, so every progress delta covers one second."""
        while True:
            await asyncio.sleep(1.0 - (time.time() % 1.0) + 0.01)
            self.recorder.expire_confirms(time.time_ns())
            self.send(selfcheck)
            self.recorder.tick()

    def send(self, selfcheck: SelfCheck, final: bool = False) -> None:
        counts = dict(self.recorder.counts)
        delta = {k: counts[k] - self._last_counts.get(k, 0) for k in counts}
        self._last_counts = counts
        step = self.current_step()
        e2e, confirms = self.recorder.take_latencies()
        if self.metrics is not None:
            self.metrics.update(step, delta, e2e, confirms)
        self.control.send(Progress(self.plan.cluster.name, self.plan.task, step,
                                   int(time.time()) - 1 if not final else int(time.time()),
                                   delta["published"], delta["confirmed"], delta["consumed"], delta["nacked"],
                                   delta["returned"], histogram.bucket_counts(e2e), final,
                                   histogram.bucket_counts(confirms), int(e2e.sum()), int(confirms.sum()),
                                   selfcheck.second()))

    def start_metrics(self) -> None:
        """Serve Prometheus metrics when the workload asks (port + task index, or any free port)."""
        if self.plan.metrics_port is None:
            return
        from rbench.live.metrics import TaskMetrics, serve

        self.metrics = TaskMetrics(self.plan.run_id, self.plan.cluster.name, self.plan.task)
        port = self.plan.metrics_port + self.plan.task if self.plan.metrics_port else 0
        try:
            self._metrics_server, port = serve(self.metrics, port, self.plan.metrics_access)
        except OSError as exc:
            raise ConfigError(f"metrics_port: cannot listen on {self.plan.metrics_access.bind} port {port} "
                              f"({exc.strerror or exc})") from None
        self.metrics_port = port
        bind = self.plan.metrics_access.bind   # an address of its own is where it is reached; any address: the host's name
        host = socket.gethostname() if bind in ("0.0.0.0", "::", "") else bind
        self.control.send(MetricsEndpoint(self.plan.cluster.name, self.plan.task, port, host,
                                          scheme=self.plan.metrics_access.scheme))

    def stop_metrics(self) -> None:
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
