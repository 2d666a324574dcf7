"""What the coordinator knows of a run's tasks so far, from their control lines: per (cluster, step) and per
wall-clock second counts and latency histograms, each task attempt's report, and each opening of the start gate.

Spark restarts a barrier stage as a whole when one of its tasks is lost (docs/cluster.md, "When an executor
dies"): the tasks come back as new task attempts, and only the latest start of a cluster counts."""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from rbench.live import histogram
from rbench.live.control.wire import (
    Failed,
    Hello,
    MetricsEndpoint,
    Notice,
    Progress,
    Ready,
    Reconnecting,
    Started,
    TaskLine,
)
from rbench.samples.generator import live_flag


@dataclass
class StepProgress:
    published: int = 0
    confirmed: int = 0
    consumed: int = 0
    nacked: int = 0
    returned: int = 0
    hist: dict[int, int] = field(default_factory=dict)
    confirm_hist: dict[int, int] = field(default_factory=dict)     # confirm latency, same log buckets
    generator: str | None = None        # why a task looked generator-bound (rbench.samples.generator.live_flag)


COUNTED = ("published", "confirmed", "consumed", "nacked", "returned")


@dataclass
class TaskAttempt:
    """One Spark task attempt as the driver saw it on the control channel (run.json's stage_attempts)."""

    cluster: str
    task: int
    attempt: int                         # Spark's task attempt id: the attempt-A folder of its samples
    host: str | None = None
    pid: int | None = None               # the Python worker that ran it
    start: int | None = None             # the start-gate round it took part in (None: it never reached t0)
    t0_ns: int | None = None
    final: bool = False                  # it sent its final progress line: it ended by itself
    error: str | None = None             # the error it ended with ("Kind: message"), when it could say
    closed_at: float | None = None       # its control connection closed
    reported: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTED, 0))   # its live counts


@dataclass
class StartRound:
    """One opening of a cluster's start gate: the task attempts that got this t0."""

    index: int
    attempts: dict[int, int]             # task → task attempt id
    t0_ns: int
    waited_s: float = 0.0                # how long the gate waited for an earlier attempt's tasks to leave
    still_connected: list[int] = field(default_factory=list)   # earlier attempts still connected when it opened


Restart = Callable[[str, StartRound, list[TaskAttempt]], None]


class ProgressBoard:
    """What the driver knows so far, per (cluster, step); fed by the server threads.

    Only the latest start of a cluster counts: when the start gate opens again for a restarted
    stage, the cluster's step and per-second figures start from zero with the new t0, and lines
    that still arrive from a superseded attempt are kept in its TaskAttempt only. The hooks (the
    run's Prometheus counters) see every progress line of every attempt: those messages did reach the broker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.steps: dict[tuple[str, int], StepProgress] = defaultdict(StepProgress)
        self.seconds: dict[tuple[str, int], StepProgress] = defaultdict(StepProgress)  # per wall-clock second
        # False when no reader takes the seconds (a --quiet run writing no progress CSV): each would stay, an entry
        # with two histograms a second (the coordinator's +12.7 MiB/h in docs/soak.md's 30-minute soak)
        self.keep_seconds = True
        self._taken: dict[str, int] = {}          # cluster → the last second take_second took
        self.current_step: dict[str, int] = {}
        self.t0_ns: dict[str, int] = {}
        self.tasks_seen: dict[str, set[int]] = defaultdict(set)
        self.first_seen: dict[str, float] = {}          # cluster → wall-clock s when its first task reported
        self.metrics_endpoints: dict[tuple[str, int], str] = {}
        self.reconnecting: dict[str, set[int]] = defaultdict(set)   # cluster → tasks disconnected right now
        self.hooks: list[Callable[[Progress], None]] = []     # e.g. rbench.live.run_metrics: sees every progress line
        self.attempts: dict[tuple[str, int], TaskAttempt] = {}         # (cluster, task attempt id) → what it did
        self.starts: dict[str, list[StartRound]] = defaultdict(list)
        self.on_restart: list[Restart] = []          # called when the gate opens for a stage Spark restarted
        self.on_started: list[Callable[[str], None]] = []   # (cluster) called whenever its start gate opens
        self.on_error: list[Callable[[str, str], None]] = []    # (cluster, "Kind: message") a current task failed with
        self.errors: dict[str, str] = {}             # cluster → the first error a current task reported
        self.notices: dict[str, list[str]] = defaultdict(list)   # cluster → the tasks' warnings, each once, in order
        self._counting: dict[str, frozenset[int]] = {}  # cluster → the task attempt ids of its latest start

    def add(self, line: TaskLine) -> None:
        """One line a task sent (the start gate takes the Ready lines: one here counts as seen, nothing more)."""
        if isinstance(line, Progress):
            for hook in self.hooks:
                hook(line)
        if isinstance(line, Failed):
            self._error(line)
            return
        cluster, attempt = line.cluster, line.attempt
        with self._lock:
            self.tasks_seen[cluster].add(line.task)
            self.first_seen.setdefault(cluster, time.time())
            rec = None if attempt is None else self._attempt(cluster, line.task, attempt)
            if isinstance(line, Hello):
                if rec is not None:
                    rec.host, rec.pid = line.host, line.pid
                return
            if isinstance(line, MetricsEndpoint):
                scheme = "https" if line.scheme == "https" else "http"
                self.metrics_endpoints[(cluster, line.task)] = f"{scheme}://{line.host}:{line.metrics_port}/metrics"
                return
            if isinstance(line, Ready):
                return
            if isinstance(line, Notice):
                text = line.notice[:Notice.MAX_CHARS]
                if text not in self.notices[cluster]:
                    self.notices[cluster].append(text)
                return
            if rec is not None and isinstance(line, Progress):
                for key in COUNTED:
                    rec.reported[key] += getattr(line, key)
                rec.final = rec.final or line.final
            counting = self._counting.get(cluster)
            if counting is not None and attempt is not None and attempt not in counting:
                return             # an attempt that a restart of the stage superseded: it no longer counts
            if isinstance(line, Reconnecting):
                tasks = self.reconnecting[cluster]
                (tasks.add if line.reconnecting else tasks.discard)(line.task)
                return
            if isinstance(line, Progress):
                progress = line
            elif isinstance(line, Started):
                self.t0_ns[cluster] = line.t0_ns
                # it opens second 0 of its step like an empty progress line: the status line starts
                # from t0's second once it has one (rbench.coordinator.progress)
                progress = Progress(cluster, line.task, line.step)
            else:
                return
            step, second = progress.step, progress.second
            taken = self._taken.get(cluster)
            if taken is not None and second <= taken:
                # a line late for its second (a busy machine: the task's tick or this thread ran late) counts
                # in the first second not taken yet: a CSV row or status line gets it a second late, none loses it
                second = taken + 1
            self.current_step[cluster] = max(step, self.current_step.get(cluster, 0))
            targets = [self.steps[(cluster, step)]]
            if self.keep_seconds:
                targets.append(self.seconds[(cluster, second)])
            for target in targets:
                for key in COUNTED:
                    setattr(target, key, getattr(target, key) + getattr(progress, key))
                histogram.merge(target.hist, progress.hist)
                histogram.merge(target.confirm_hist, progress.confirm_hist)
            flag = live_flag(progress.gen) if progress.gen is not None and not progress.final else None
            if flag is not None and self.keep_seconds:
                second_progress = self.seconds[(cluster, second)]
                second_progress.generator = second_progress.generator or f"task {line.task}: {flag}"

    def _error(self, line: Failed) -> None:
        """A task ended with an error it could name: kept, and the first of the cluster's current attempt goes to on_error."""
        cluster, error, attempt = line.cluster, line.error, line.attempt
        with self._lock:
            if attempt is not None:
                self._attempt(cluster, line.task, attempt).error = error
            counting = self._counting.get(cluster)
            if counting and attempt is not None and attempt < min(counting):
                return                 # a superseded attempt's error: the stage already runs again
            if cluster in self.errors:
                return
            self.errors[cluster] = error
            hooks = list(self.on_error)
        for hook in hooks:
            hook(cluster, error)

    def _attempt(self, cluster: str, task: int, attempt: int) -> TaskAttempt:
        rec = self.attempts.get((cluster, attempt))
        if rec is None:
            rec = self.attempts[(cluster, attempt)] = TaskAttempt(cluster, task, attempt)
        return rec

    def closed(self, cluster: str, attempt: int) -> None:
        """The control connection of this task attempt closed (it ended, or its process died)."""
        with self._lock:
            rec = self.attempts.get((cluster, attempt))
            if rec is not None and rec.closed_at is None:
                rec.closed_at = time.time()

    def started(self, cluster: str, attempts: dict[int, int], t0_ns: int, waited_s: float = 0.0,
                still_connected: list[int] | None = None) -> StartRound:
        """The start gate opened for these task attempts (task → attempt id) with this t0.

        From now on only their progress counts; a start after the first (Spark restarted the
        stage) clears what the cluster's earlier attempt had shown."""
        with self._lock:
            rounds = self.starts[cluster]
            start = StartRound(len(rounds), dict(attempts), t0_ns, waited_s, sorted(still_connected or []))
            rounds.append(start)
            self._counting[cluster] = frozenset(attempts.values())
            for task, attempt in attempts.items():
                rec = self._attempt(cluster, task, attempt)
                rec.start, rec.t0_ns = start.index, t0_ns
            superseded = sorted((a for (c, _), a in self.attempts.items() if c == cluster and a.attempt not in attempts.values()),
                                key=lambda a: a.attempt)
            if superseded:
                for table in (self.steps, self.seconds):
                    for key in [k for k in table if k[0] == cluster]:
                        del table[key]
                self.current_step[cluster] = 0
            self.t0_ns[cluster] = t0_ns
        if superseded:
            for hook in self.on_restart:
                hook(cluster, start, superseded)
        for started in self.on_started:
            started(cluster)
        return start

    def cluster_attempts(self, cluster: str) -> tuple[list[TaskAttempt], list[StartRound]]:
        """Every task attempt of ``cluster`` seen so far (by attempt id) and every opening of its gate."""
        with self._lock:
            return (sorted((a for (c, _), a in self.attempts.items() if c == cluster), key=lambda a: a.attempt),
                    list(self.starts.get(cluster, [])))

    def take_second(self, cluster: str, second: int) -> StepProgress:
        """What the tasks did during wall-clock second `second` (and forget older ones); lines that arrive later
        for it or an older second count in the next second taken."""
        with self._lock:
            self._taken[cluster] = max(second, self._taken.get(cluster, second))
            for key in [k for k in self.seconds if k[0] == cluster and k[1] < second]:
                del self.seconds[key]
            return self.seconds.pop((cluster, second), StepProgress())

    def first_second(self, cluster: str) -> int | None:
        """The earliest wall-clock second of `cluster` not taken yet (None when there is none)."""
        with self._lock:
            return min((s for c, s in self.seconds if c == cluster), default=None)

    def step(self, cluster: str, step: int) -> StepProgress:
        with self._lock:
            s = self.steps.get((cluster, step), StepProgress())
            return StepProgress(s.published, s.confirmed, s.consumed, s.nacked, s.returned, dict(s.hist),
                                dict(s.confirm_hist))
