"""The coordinator's end of the control channel: one thread per task connection reads its lines into the
progress board and the start gate, and the coordinator broadcasts stop, pause and resume to every task.

A line it cannot read (not JSON, a field missing or of the wrong type) is refused: counted, and logged
once per connection, never a traceback; a line longer than wire.MAX_LINE closes that connection. A task
of this version never sends either, so a refusal means a peer that is not one."""
from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import threading
from collections.abc import Callable
from io import BufferedIOBase

from rbench.errors import CodecError
from rbench.live.control.board import ProgressBoard
from rbench.live.control.gate import StartGate
from rbench.live.control.wire import PAUSE, RESUME, STOP, Command, LineTooLong, Ready, parse_line, read_line

log = logging.getLogger(__name__)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        server = self.server
        server.connections.add(self.wfile)
        server.sockets.add(self.connection)
        conn = id(self)
        ident: tuple[str, int] | None = None          # (cluster, task attempt id) once a line says
        refused = 0
        try:
            if server.stopping.is_set():
                self._send(STOP)
            elif server.consumers_paused:       # a task that connects late pauses like the others
                self._send(PAUSE)
            while True:
                try:
                    raw = read_line(self.rfile)
                    if not raw:
                        break
                    line = parse_line(raw)
                    if ident is None and line.attempt is not None:
                        ident = (line.cluster, line.attempt)
                        server.gate.identify(conn, *ident)
                    if isinstance(line, Ready):
                        server.gate.ready(line, self.wfile, conn)
                    else:
                        server.board.add(line)
                except CodecError as exc:
                    refused += 1
                    server.refused += 1
                    if refused == 1:
                        log.warning("control channel: refused a line from %s: %s", self.client_address[0], exc)
                    if isinstance(exc, LineTooLong):
                        break               # the rest of that line would be read as lines of its own
        except OSError:
            pass
        except Exception as exc:              # a bug here must not end in a traceback on the user's terminal
            server.refused += 1
            log.warning("control channel: dropped the connection from %s: %s: %s", self.client_address[0],
                        type(exc).__name__, exc)
        finally:
            server.connections.discard(self.wfile)
            server.sockets.discard(self.connection)
            if ident is not None:
                server.board.closed(*ident)
            server.gate.closed(conn)

    def _send(self, command: Command) -> None:
        try:
            self.wfile.write(command.to_line())
            self.wfile.flush()
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], board: ProgressBoard) -> None:
        super().__init__(address, _Handler)
        self.board = board
        self.connections: set[BufferedIOBase] = set()
        self.sockets: set[socket.socket] = set()
        self.stopping = threading.Event()
        self.gate = StartGate(board)
        self.consumers_paused = False
        self.refused = 0                 # lines refused, over every connection


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
        self._broadcast(STOP)

    def pause_consumers(self, paused: bool) -> None:
        """Tell every task to pause (or resume) its consumers; tasks that connect later are told on connect."""
        self._server.consumers_paused = paused
        self._broadcast(PAUSE if paused else RESUME)

    def _broadcast(self, command: Command) -> None:
        line = command.to_line()
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
    def refused(self) -> int:
        """How many lines the server refused (not JSON, a field missing or of the wrong type, too long)."""
        return self._server.refused

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
