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
"""
from __future__ import annotations

import asyncio
import contextlib
import json
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


class ProgressBoard:
    """What the driver knows so far, per (cluster, step); fed by the server threads."""

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

    def add(self, msg: dict[str, Any]) -> None:
        for hook in self.hooks:
            hook(msg)
        cluster, step = str(msg["cluster"]), int(msg.get("step", 0))
        with self._lock:
            self.tasks_seen[cluster].add(int(msg.get("task", -1)))
            self.first_seen.setdefault(cluster, time.time())
            if "metrics_port" in msg:
                self.metrics_endpoints[(cluster, int(msg["task"]))] = f"http://{msg.get('host', '?')}:{msg['metrics_port']}/metrics"
                return
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


class _StartGate:
    """Collects `ready` lines per cluster; answers every waiting task once all are in.

    A `ready` from a task already waiting means Spark restarted the barrier stage (all its
    tasks are relaunched together): the round starts again from that line."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.expected: dict[str, int] = {}
        self._waiting: dict[str, dict[int, tuple[Any, int]]] = defaultdict(dict)

    def ready(self, msg: dict[str, Any], wfile: Any) -> None:
        cluster, task = str(msg["cluster"]), int(msg["task"])
        with self._lock:
            waiting = self._waiting[cluster]
            if task in waiting:
                waiting.clear()
            waiting[task] = (wfile, int(msg["proposal_ns"]))
            if len(waiting) < self.expected.get(cluster, 1):
                return
            answer = list(waiting.values())
            waiting.clear()
        t0 = max(p for _, p in answer) + GATE_MARGIN_NS
        for w, _ in answer:
            try:
                w.write(b"t0 %d\n" % t0)
                w.flush()
            except OSError:
                pass


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.server.connections.add(self.wfile)
        self.server.sockets.add(self.connection)
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
                if msg.get("ready"):
                    self.server.gate.ready(msg, self.wfile)
                    continue
                self.server.board.add(msg)
        except OSError:
            pass
        finally:
            self.server.connections.discard(self.wfile)
            self.server.sockets.discard(self.connection)

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
        self.gate = _StartGate()
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

    def __init__(self, address: tuple[str, int] | None) -> None:
        self.address = address
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
        self._writer.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    async def aclose(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
