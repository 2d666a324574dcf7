"""The start gate: every task of a cluster's stage publishes from one t0, answered at once when all are ready.

Spark's BarrierTaskContext.allGather answers by polling (about one second per call, measured), so
instead each task sends a Ready line with its proposed t0 and the gate, once every task of that cluster
and attempt is ready, answers all of them with one t0 (milliseconds). Tasks fall back to allGather when
not every task reached the coordinator (rbench.runtime.start decides).
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from rbench.live.control.board import ProgressBoard
from rbench.live.control.wire import Ready, StartAt

GATE_MARGIN_NS = 20_000_000     # t0 this far after the last proposal: the answer reaches every executor first,
GATE_MARGIN_PER_TASK_NS = 3_000_000     # plus this per task answered: the answers are written one after the other
GATE_MARGIN_MAX_NS = 5_000_000_000      # and each executor's loop must wake (bench-scale, docs/scale.md)
wall_clock_ns = time.time_ns            # the coordinator's clock (tests set their own)


def gate_margin_ns(tasks: int) -> int:
    """How far after the last proposal t0 is for a round of ``tasks``: with a flat 20 ms, 64 tasks on 2 busy
    cores got the answer 43-121 ms after t0 (bench-scale), so their first sends were late by as much; the
    answers to 32 tasks went out about 2.4 ms apart there."""
    return min(GATE_MARGIN_NS + GATE_MARGIN_PER_TASK_NS * max(tasks, 1), GATE_MARGIN_MAX_NS)
EARLIER_ATTEMPT_WAIT_S = 30.0   # the longest the gate waits for a restarted stage's earlier attempt to leave


class LineSink(Protocol):
    """Where the gate's answer to one task goes (the server's sealed writer of that connection)."""

    def write(self, line: bytes, /) -> object: ...

    def flush(self) -> None: ...


@dataclass
class _Waiting:
    wfile: LineSink
    proposal_ns: int
    attempt: int | None           # Spark's task attempt id (None: a client that does not say)
    conn: int                     # the connection it came on


class StartGate:
    """Collects Ready lines per cluster; answers every waiting task once all are in.

    When Spark restarts a barrier stage, every task comes back with a new, larger task attempt
    id, while the earlier attempt's tasks may still be running until Spark kills them (it
    waits ``spark.python.task.killTimeout``, 2 s, before it kills a Python worker). So:

    * a round holds the ready lines of one stage attempt: the coordinator gives the gate Spark's
      answer to "which stage attempt is this task attempt from?" (``stage_of``); a line from a
      newer stage attempt drops the waiting lines of older ones, a line from an older one is
      ignored (Spark is about to kill that task). Without that answer, per task the line with the
      largest attempt id is kept;
    * a ready line whose connection closed is forgotten: a dead task is never answered and
      never completes a round;
    * a complete round opens only once no other task attempt of that cluster is still connected
      (the attempt it replaces has ended), or after EARLIER_ATTEMPT_WAIT_S: the two attempts
      never publish at the same time, and the restarted one's t0 is after the earlier one's end.
    """

    def __init__(self, board: ProgressBoard) -> None:
        self._lock = threading.Lock()
        self.board = board
        self.expected: dict[str, int] = {}
        self._waiting: dict[str, dict[int, _Waiting]] = defaultdict(dict)
        self._live: dict[int, tuple[str, int]] = {}       # connection → (cluster, task attempt id) once known
        self._blocked_since: dict[str, float] = {}
        self.stage_of: dict[str, Callable[[int], int | None]] = {}     # cluster → task attempt id → stage attempt
        self._round_stage: dict[str, int] = {}              # cluster → stage attempt of the lines waiting

    def identify(self, conn: int, cluster: str, attempt: int) -> None:
        with self._lock:
            self._live[conn] = (cluster, attempt)

    def closed(self, conn: int) -> None:
        """A control connection closed: forget it, and its ready line; a blocked round may open now."""
        with self._lock:
            ident = self._live.pop(conn, None)
            clusters = [c for c, waiting in self._waiting.items() if any(r.conn == conn for r in waiting.values())]
            for c in clusters:
                self._waiting[c] = {t: r for t, r in self._waiting[c].items() if r.conn != conn}
        if ident is not None:
            self._try_open(ident[0])

    def ready(self, line: Ready, wfile: LineSink, conn: int) -> None:
        cluster, task, attempt = line.cluster, line.task, line.attempt
        resolve = self.stage_of.get(cluster)
        stage = None if resolve is None or attempt is None else resolve(attempt)     # may take a few ms (Spark)
        with self._lock:
            if attempt is not None:
                self._live[conn] = (cluster, attempt)
            waiting = self._waiting[cluster]
            if stage is not None:
                current = self._round_stage.get(cluster)
                if current is not None and stage < current:
                    return                # a task of an earlier stage attempt: Spark is about to kill it
                if current is not None and stage > current:
                    waiting.clear()       # Spark restarted the stage: the lines waiting are the dead attempt's
                self._round_stage[cluster] = stage
            held = waiting.get(task)
            if held is not None and attempt is not None and held.attempt is not None and held.attempt > attempt:
                return                    # a superseded attempt: Spark is about to kill it
            waiting[task] = _Waiting(wfile, line.proposal_ns, attempt, conn)
        self._try_open(cluster)

    def _try_open(self, cluster: str) -> None:
        with self._lock:
            waiting = self._waiting[cluster]
            if not waiting or len(waiting) < self.expected.get(cluster, 1):
                return
            mine = {r.conn for r in waiting.values()}
            others = sorted(a for conn, (c, a) in self._live.items() if c == cluster and conn not in mine)
            now = time.monotonic()
            since = self._blocked_since.setdefault(cluster, now)
            if others and now - since < EARLIER_ATTEMPT_WAIT_S:
                if since == now:          # first time blocked: look again when the wait is over
                    timer = threading.Timer(EARLIER_ATTEMPT_WAIT_S, self._try_open, args=(cluster,))
                    timer.daemon = True
                    timer.start()
                return
            answer = dict(waiting)
            waiting.clear()
            del self._blocked_since[cluster]
        # the margin counts from now when the last proposal is already old (the line waited for the GIL, the
        # stage attempt's lookup in Spark took a while): a later t0 on a coordinator whose clock is ahead is harmless
        t0 = max(max(r.proposal_ns for r in answer.values()), wall_clock_ns()) + gate_margin_ns(len(answer))
        if all(r.attempt is not None for r in answer.values()):
            self.board.started(cluster, {t: int(r.attempt) for t, r in answer.items() if r.attempt is not None}, t0,
                               now - since, others)
        line = StartAt(t0).to_line()
        for r in answer.values():
            try:
                r.wfile.write(line)
                r.wfile.flush()
            except OSError:
                pass
