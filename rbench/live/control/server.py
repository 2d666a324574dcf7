"""The coordinator's end of the control channel: one thread per task connection reads its lines into the
progress board and the start gate, and the coordinator broadcasts stop, pause and resume to every task.

Nothing a peer sends is read as a line before it has answered the run's handshake (rbench.live.control.auth):
a peer that does not, or sends a line without its MAC, is hung up on at once and noted (address, reason,
first time: rbench.live.control.refusals → run.json). At most MAX_PENDING connections may be in their
handshake at once, each for at most auth.HANDSHAKE_TIMEOUT_S, so a flood of idle connections holds
neither threads nor memory for long. A line from a task that passed the handshake but cannot be read
(not JSON, a field missing or of the wrong type) is dropped and counted, logged once, never a traceback;
a line longer than wire.MAX_LINE closes that connection. With ``tls`` the connection runs over TLS
first (rbench.live.control.tls)."""
from __future__ import annotations

import contextlib
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable
from typing import BinaryIO

from rbench.config.types import ControlEndpoint
from rbench.errors import CodecError
from rbench.live import SHUTDOWN_POLL_S
from rbench.live.control import auth
from rbench.live.control.board import ProgressBoard
from rbench.live.control.gate import StartGate
from rbench.live.control.refusals import RefusalLog
from rbench.live.control.wire import PAUSE, RESUME, STOP, Command, LineTooLong, Ready, parse_line, read_line
from rbench.samples.control_traffic import ControlTraffic
from rbench.samples.refused import MALFORMED_LINE, RefusedPeer

MAX_PENDING = 64          # connections in their handshake at once; more are refused ("too many handshakes")


class _Outbox:
    """Coordinator → one task: each line sealed with its MAC and written under a lock (the handler, the start
    gate and the broadcasts all write, and the MACs count lines in the order they are sent)."""

    def __init__(self, wfile: BinaryIO, seal: auth.LineSeal) -> None:
        self._wfile, self._seal, self._lock = wfile, seal, threading.Lock()

    def write(self, line: bytes) -> None:
        with self._lock:
            self._wfile.write(self._seal.seal(line))
            self._wfile.flush()

    def flush(self) -> None:
        """Every write is flushed already (the gate's interface)."""


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        server = self.server
        peer = str(self.client_address[0])
        sock: socket.socket = self.request
        outbox: _Outbox | None = None
        conn = id(self)
        ident: tuple[str, int] | None = None          # (cluster, task attempt id) once a line says
        try:
            sock, rfile, outbox, opener = self._admit(sock)
            server.connections.add(outbox)
            server.sockets.add(sock)
            server.count(0, 0, 1)
            if server.stopping.is_set():
                outbox.write(STOP.to_line())
            elif server.consumers_paused:       # a task that connects late pauses like the others
                outbox.write(PAUSE.to_line())
            while True:
                raw = read_line(rfile)
                if not raw:
                    break
                server.count(1, len(raw), 0)
                payload = opener.open(raw)
                try:
                    line = parse_line(payload)
                except CodecError as exc:
                    server.refusals.note(peer, MALFORMED_LINE, str(exc))
                    continue
                if ident is None and line.attempt is not None:
                    ident = (line.cluster, line.attempt)
                    server.gate.identify(conn, *ident)
                if isinstance(line, Ready):
                    server.gate.ready(line, outbox, conn)
                else:
                    server.board.add(line)
        except LineTooLong:
            server.refusals.note(peer, "line too long")   # the rest of it would be read as lines of its own
        except auth.AuthError as exc:
            server.refusals.note(peer, exc.reason)
        except OSError:
            pass
        except Exception as exc:              # a bug here must not end in a traceback on the user's terminal
            server.refusals.note(peer, "dropped on an internal error", f"{type(exc).__name__}: {exc}")
        finally:
            if outbox is not None:
                server.connections.discard(outbox)
            server.sockets.discard(sock)
            if ident is not None:
                server.board.closed(*ident)
            server.gate.closed(conn)
            _hang_up([sock])
            with contextlib.suppress(OSError):
                sock.close()

    def _admit(self, sock: socket.socket) -> tuple[socket.socket, BinaryIO, _Outbox, auth.LineSeal]:
        """TLS (when on) and the handshake, within HANDSHAKE_TIMEOUT_S; AuthError naming why not."""
        server = self.server
        with server.pending_lock:
            server.pending += 1
            crowded = server.pending > MAX_PENDING
        # the timeout bounds each read; the timer bounds the whole handshake (a byte every few seconds is no way in)
        current = [sock]                   # the TLS socket once wrapped (wrapping detaches the plain one)
        deadline = threading.Timer(auth.HANDSHAKE_TIMEOUT_S, _hang_up, args=(current,))
        deadline.daemon = True
        deadline.start()
        try:
            if crowded:
                raise auth.AuthError("too many handshakes at once")
            sock.settimeout(auth.HANDSHAKE_TIMEOUT_S)
            if server.tls is not None:
                try:
                    sock = server.tls.wrap_socket(sock, server_side=True)
                    current[0] = sock
                except (ssl.SSLError, OSError):
                    raise auth.AuthError("TLS handshake failed") from None
            rfile: BinaryIO = sock.makefile("rb")
            wfile: BinaryIO = sock.makefile("wb")
            nonce, challenge = auth.challenge()
            try:
                wfile.write(challenge)
                wfile.flush()
                answer = rfile.readline(auth.HANDSHAKE_LIMIT)
            except OSError:                # gone, reset or silent (the timeouts)
                raise auth.AuthError("no handshake") from None
            _who, client_nonce = auth.check_answer(server.secret, nonce, answer)
            wfile.write(auth.welcome(server.secret, nonce, client_nonce))
            wfile.flush()
            sock.settimeout(None)
        except BaseException:
            _hang_up(current)              # at once: close() alone waits for the files made from the socket
            raise
        finally:
            deadline.cancel()
            with server.pending_lock:
                server.pending -= 1
        return (sock, rfile, _Outbox(wfile, auth.LineSeal(server.secret, nonce, client_nonce, auth.TO_TASK)),
                auth.LineSeal(server.secret, nonce, client_nonce, auth.TO_COORDINATOR))


def _hang_up(current: list[socket.socket]) -> None:
    with contextlib.suppress(OSError):
        current[0].shutdown(socket.SHUT_RDWR)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], board: ProgressBoard, tls: ssl.SSLContext | None) -> None:
        super().__init__(address, _Handler)
        self.board = board
        self.secret = auth.new_secret()
        self.tls = tls
        self.connections: set[_Outbox] = set()
        self.sockets: set[socket.socket] = set()
        self.stopping = threading.Event()
        self.gate = StartGate(board)
        self.consumers_paused = False
        self.refusals = RefusalLog()
        self.pending = 0
        self.pending_lock = threading.Lock()
        self._traffic = [0, 0, 0]          # lines, bytes, connections read (rbench.samples.control_traffic)
        self._traffic_lock = threading.Lock()

    def count(self, lines: int, size: int, connections: int) -> None:
        with self._traffic_lock:
            self._traffic[0] += lines
            self._traffic[1] += size
            self._traffic[2] += connections

    @property
    def traffic(self) -> ControlTraffic:
        with self._traffic_lock:
            return ControlTraffic(*self._traffic)

    def handle_error(self, request: object, client_address: object) -> None:
        """The handler catches everything; nothing reaches socketserver's traceback printer."""


class ControlServer:
    """Driver side: accepts task connections, aggregates progress, broadcasts stop."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls: tuple[ssl.SSLContext, bytes] | None = None) -> None:
        """``tls``: the context to serve and its certificate's SHA-256 (rbench.live.control.tls.server_context)."""
        self.board = ProgressBoard()
        self._server = _Server((host, port), self.board, None if tls is None else tls[0])
        self._pin = None if tls is None else tls[1]
        # shutdown() waits for serve_forever's next poll: at the default 0.5 s that was half a second between the
        # last message and the summary of every run
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S},
                                        name="rbench-control", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def endpoint(self) -> ControlEndpoint:
        """What a task needs to connect and be let in: address, the run's secret, the certificate to pin."""
        host, port = self.address
        return ControlEndpoint(host, port, self._server.secret, self._pin)

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
        for outbox in list(self._server.connections):
            with contextlib.suppress(OSError):
                outbox.write(line)

    def idle(self) -> bool:
        """No task connected: every line a finished task sent has been read."""
        return not self._server.connections

    @property
    def refused(self) -> int:
        """How many connections (and lines from tasks: not JSON, a field missing or of the wrong type) the
        server refused."""
        return self._server.refusals.total()

    @property
    def traffic(self) -> ControlTraffic:
        """Lines, bytes and connections read from tasks so far (run.json ``control_traffic``)."""
        return self._server.traffic

    def refused_peers(self) -> tuple[RefusedPeer, ...]:
        """Who was refused, per (address, reason): what run.json's ``control_refused`` holds."""
        return self._server.refusals.records()

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
