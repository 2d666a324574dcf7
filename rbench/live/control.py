"""Progress and stop signals between executor tasks and the Spark driver.

Spark only reports a task's result when it ends; a 30-minute capacity run needs a
status line every second and a way to stop cleanly. Each task opens one TCP
connection to the driver and sends JSON lines (progress deltas, once a second);
the driver answers with a single `stop` line to every task when the user presses
Ctrl-C or sends SIGTERM, and the tasks then flush their samples and commit.
The channel is best-effort: a task that cannot reach the driver still runs.

The same channel is the start gate: Spark's BarrierTaskContext.allGather answers by
polling (about one second per call, measured), so instead each task sends `ready`
with its proposed t0 and the driver, once every task of that cluster and attempt is
ready, answers all of them with one t0 at once (milliseconds). Tasks fall back to
allGather when not every task reached the driver (runtime/task.py decides).

Spark restarts a barrier stage as a whole when one of its tasks is lost (docs/cluster.md, "When
an executor dies"). Every line a task sends carries its Spark task attempt id, so the driver
tells the attempts apart: the gate opens for one attempt's tasks only, and only after the
attempt before it has left; the progress of the superseded attempt stops counting, and the
driver keeps, per task attempt, what it reported and how it ended (for run.json).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import socketserver
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rbench.live import histogram
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
    run's Prometheus counters) see every line of every attempt: those messages did reach the broker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.steps: dict[tuple[str, int], StepProgress] = defaultdict(StepProgress)
        self.seconds: dict[tuple[str, int], StepProgress] = defaultdict(StepProgress)  # per wall-clock second
        self.current_step: dict[str, int] = {}
        self.t0_ns: dict[str, int] = {}
        self.tasks_seen: dict[str, set[int]] = defaultdict(set)
        self.first_seen: dict[str, float] = {}          # cluster → wall-clock s when its first task reported
        self.metrics_endpoints: dict[tuple[str, int], str] = {}
        self.reconnecting: dict[str, set[int]] = defaultdict(set)   # cluster → tasks disconnected right now
        self.hooks: list[Callable[[dict[str, Any]], None]] = []     # e.g. rbench.live.run_metrics: sees every line
        self.attempts: dict[tuple[str, int], TaskAttempt] = {}         # (cluster, task attempt id) → what it did
        self.starts: dict[str, list[StartRound]] = defaultdict(list)
        self.on_restart: list[Restart] = []          # called when the gate opens for a stage Spark restarted
        self.on_error: list[Callable[[str, str], None]] = []    # (cluster, "Kind: message") a current task failed with
        self.errors: dict[str, str] = {}             # cluster → the first error a current task reported
        self._counting: dict[str, frozenset[int]] = {}  # cluster → the task attempt ids of its latest start

    def add(self, msg: dict[str, Any]) -> None:
        for hook in self.hooks:
            hook(msg)
        if "error" in msg:
            self._error(msg)
            return
        cluster, step = str(msg["cluster"]), int(msg.get("step", 0))
        attempt = msg.get("attempt")
        with self._lock:
            self.tasks_seen[cluster].add(int(msg.get("task", -1)))
            self.first_seen.setdefault(cluster, time.time())
            rec = None if attempt is None else self._attempt(cluster, int(msg.get("task", -1)), int(attempt))
            if msg.get("hello"):
                assert rec is not None
                rec.host, rec.pid = msg.get("host"), msg.get("pid")
                return
            if "metrics_port" in msg:
                self.metrics_endpoints[(cluster, int(msg["task"]))] = f"http://{msg.get('host', '?')}:{msg['metrics_port']}/metrics"
                return
            if rec is not None:
                for key in COUNTED:
                    rec.reported[key] += int(msg.get(key, 0))
                rec.final = rec.final or bool(msg.get("final"))
            counting = self._counting.get(cluster)
            if counting is not None and attempt is not None and int(attempt) not in counting:
                return             # an attempt that a restart of the stage superseded: it no longer counts
            if "reconnecting" in msg:            # a task lost its connection (True) or is back (False)
                tasks = self.reconnecting[cluster]
                (tasks.add if msg["reconnecting"] else tasks.discard)(int(msg.get("task", -1)))
                return
            if "t0_ns" in msg:
                self.t0_ns[cluster] = int(msg["t0_ns"])
            self.current_step[cluster] = max(step, self.current_step.get(cluster, 0))
            second = int(msg.get("second", 0))
            for target in (self.steps[(cluster, step)], self.seconds[(cluster, second)]):
                for key in ("published", "confirmed", "consumed", "nacked", "returned"):
                    setattr(target, key, getattr(target, key) + int(msg.get(key, 0)))
                histogram.merge(target.hist, msg.get("hist", {}))
                histogram.merge(target.confirm_hist, msg.get("confirm_hist", {}))
            flag = live_flag(msg["gen"]) if isinstance(msg.get("gen"), dict) and not msg.get("final") else None
            if flag is not None:
                second_progress = self.seconds[(cluster, second)]
                second_progress.generator = second_progress.generator or f"task {msg.get('task', '?')}: {flag}"

    def _error(self, msg: dict[str, Any]) -> None:
        """A task ended with an error it could name: kept, and the first of the cluster's current attempt goes to on_error."""
        cluster, error, attempt = str(msg["cluster"]), str(msg["error"]), msg.get("attempt")
        with self._lock:
            if attempt is not None:
                self._attempt(cluster, int(msg.get("task", -1)), int(attempt)).error = error
            counting = self._counting.get(cluster)
            if counting and attempt is not None and int(attempt) < min(counting):
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
        return start

    def cluster_attempts(self, cluster: str) -> tuple[list[TaskAttempt], list[StartRound]]:
        """Every task attempt of ``cluster`` seen so far (by attempt id) and every opening of its gate."""
        with self._lock:
            return (sorted((a for (c, _), a in self.attempts.items() if c == cluster), key=lambda a: a.attempt),
                    list(self.starts.get(cluster, [])))

    def take_second(self, cluster: str, second: int) -> StepProgress:
        """What the tasks did during wall-clock second `second` (and forget older ones)."""
        with self._lock:
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


GATE_MARGIN_NS = 20_000_000     # t0 this far after the last proposal: the answer reaches every executor first
EARLIER_ATTEMPT_WAIT_S = 30.0   # the longest the gate waits for a restarted stage's earlier attempt to leave


@dataclass
class _Ready:
    wfile: Any
    proposal_ns: int
    attempt: int | None           # Spark's task attempt id (None: a client that does not say)
    conn: int                     # the connection it came on


class _StartGate:
    """Collects `ready` lines per cluster; answers every waiting task once all are in.

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
        self._waiting: dict[str, dict[int, _Ready]] = defaultdict(dict)
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

    def ready(self, msg: dict[str, Any], wfile: Any, conn: int) -> None:
        cluster, task = str(msg["cluster"]), int(msg["task"])
        attempt = None if msg.get("attempt") is None else int(msg["attempt"])
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
            waiting[task] = _Ready(wfile, int(msg["proposal_ns"]), attempt, conn)
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
        t0 = max(r.proposal_ns for r in answer.values()) + GATE_MARGIN_NS
        if all(r.attempt is not None for r in answer.values()):
            self.board.started(cluster, {t: int(r.attempt) for t, r in answer.items() if r.attempt is not None}, t0,
                               now - since, others)
        for r in answer.values():
            try:
                r.wfile.write(b"t0 %d\n" % t0)
                r.wfile.flush()
            except OSError:
                pass


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.server.connections.add(self.wfile)
        self.server.sockets.add(self.connection)
        conn = id(self)
        ident: tuple[str, int] | None = None          # (cluster, task attempt id) once a line says
        try:
            if self.server.stopping.is_set():
                self._send_stop()
            elif self.server.consumers_paused:       # a task that connects late pauses like the others
                self._send(b"pause\n")
            for line in self.rfile:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if ident is None and msg.get("attempt") is not None and "cluster" in msg:
                    ident = (str(msg["cluster"]), int(msg["attempt"]))
                    self.server.gate.identify(conn, *ident)
                if msg.get("ready"):
                    self.server.gate.ready(msg, self.wfile, conn)
                    continue
                self.server.board.add(msg)
        except OSError:
            pass
        finally:
            self.server.connections.discard(self.wfile)
            self.server.sockets.discard(self.connection)
            if ident is not None:
                self.server.board.closed(*ident)
            self.server.gate.closed(conn)

    def _send_stop(self) -> None:
        self._send(b"stop\n")

    def _send(self, line: bytes) -> None:
        try:
            self.wfile.write(line)
            self.wfile.flush()
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], board: ProgressBoard) -> None:
        super().__init__(address, _Handler)
        self.board = board
        self.connections: set[Any] = set()
        self.sockets: set[socket.socket] = set()
        self.stopping = threading.Event()
        self.gate = _StartGate(board)
        self.consumers_paused = False


class ControlServer:
    """Driver side: accepts task connections, aggregates progress, broadcasts stop."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.board = ProgressBoard()
        self._server = _Server((host, port), self.board)
        self._thread = threading.Thread(target=self._server.serve_forever, name="rbench-control", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> ControlServer:
        self._thread.start()
        return self

    def expect_tasks(self, cluster: str, n: int) -> None:
        """The start gate of `cluster` opens when `n` tasks (one attempt of its stage) are ready."""
        self._server.gate.expected[cluster] = n

    def resolve_stage_attempts(self, cluster: str, stage_of: Callable[[int], int | None]) -> None:
        """How the start gate learns which stage attempt a task attempt id belongs to (None: unknown);
        the coordinator passes rbench.spark.StageAttempts, which asks Spark."""
        self._server.gate.stage_of[cluster] = stage_of

    def stop_tasks(self) -> None:
        self._server.stopping.set()
        self._broadcast(b"stop\n")

    def pause_consumers(self, paused: bool) -> None:
        """Tell every task to pause (or resume) its consumers; tasks that connect later are told on connect."""
        self._server.consumers_paused = paused
        self._broadcast(b"pause\n" if paused else b"resume\n")

    def _broadcast(self, line: bytes) -> None:
        for wfile in list(self._server.connections):
            try:
                wfile.write(line)
                wfile.flush()
            except OSError:
                pass

    def idle(self) -> bool:
        """No task connected: every line a finished task sent has been read."""
        return not self._server.connections

    @property
    def paused(self) -> bool:
        return self._server.consumers_paused

    @property
    def stopping(self) -> bool:
        return self._server.stopping.is_set()

    def close(self) -> None:
        """Stop accepting and hang up on every task still connected (their start gate fails, not hangs)."""
        self._server.shutdown()
        self._server.server_close()
        for sock in list(self._server.sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class ControlClient:
    """Task side: sends progress lines; `stop_requested` is set when the driver says stop."""

    def __init__(self, address: tuple[str, int] | None, tags: dict[str, Any] | None = None) -> None:
        """``tags`` go into every line sent (the task's Spark attempt id: the driver tells attempts apart)."""
        self.address = address
        self.tags = dict(tags or {})
        self.stop_requested = asyncio.Event()
        self.on_command: Callable[[str], None] | None = None     # "pause" / "resume" from the coordinator
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._t0: asyncio.Future[int] | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self) -> None:
        if self.address is None:
            return
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*self.address), 5)
            self._writer = writer
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, asyncio.TimeoutError):
            self._writer = None
            return
        self._reader_task = asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                word = line.strip()
                if word == b"stop":
                    self.stop_requested.set()
                elif word.startswith(b"t0 ") and self._t0 is not None and not self._t0.done():
                    self._t0.set_result(int(word[3:]))
                elif word in (b"pause", b"resume") and self.on_command is not None:
                    self.on_command(word.decode())
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if self._t0 is not None and not self._t0.done():
                self._t0.set_exception(ConnectionError("the control connection to the Spark driver closed before the start"))

    async def agree_t0(self, cluster: str, task: int, proposal_ns: int) -> int:
        """Wait at the driver's start gate; the t0 it answers is the same for every task of the stage.

        No timeout of its own: a task that fails before it is ready fails the barrier stage,
        and Spark then kills the tasks waiting here."""
        self._t0 = asyncio.get_running_loop().create_future()
        if self._reader_task is not None and self._reader_task.done():
            raise ConnectionError("the control connection to the Spark driver closed before the start")
        self.send({"ready": True, "cluster": cluster, "task": task, "proposal_ns": proposal_ns})
        return await self._t0

    def send(self, msg: dict[str, Any]) -> None:
        if self._writer is None or self._writer.is_closing():
            return
        if self.tags:
            msg = {**msg, **self.tags}
        self._writer.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    def hello(self, cluster: str, task: int) -> None:
        """Say who this is (task, attempt, host, pid) as soon as connected, before any other line."""
        self.send({"cluster": cluster, "task": task, "hello": True, "host": socket.gethostname(), "pid": os.getpid()})

    async def aclose(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
