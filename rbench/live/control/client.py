"""The task's end of the control channel: it sends its lines (rbench.live.control.wire) and follows the
coordinator's answers: stop, pause/resume of its consumers, and the start gate's t0.

The channel is best-effort: a task that cannot reach the coordinator still runs (the start then goes
through Spark's allGather, rbench.runtime.start). Before any line, the task answers the coordinator's
challenge with the run's secret and checks the coordinator's proof (rbench.live.control.auth); over
TLS, it first checks the coordinator's certificate against the one pinned in its plan. Every line
either way then carries its MAC; an answer whose MAC is wrong ends the connection (it is not the
coordinator's)."""
from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from collections.abc import Callable

from rbench.config.types import ControlEndpoint
from rbench.errors import CodecError
from rbench.live.control import auth, tls
from rbench.live.control.wire import MAX_LINE, STOP, Command, Hello, Ready, StartAt, TaskLine, parse_answer

CONNECT_TIMEOUT_S = 5.0


class ControlClient:
    """Task side: sends progress lines; `stop_requested` is set when the driver says stop."""

    def __init__(self, endpoint: ControlEndpoint | None, attempt: int | None = None) -> None:
        """``attempt`` (the task's Spark attempt id) goes into every line sent: the driver tells attempts apart."""
        self.endpoint = endpoint
        self.attempt = attempt
        self.problem: str | None = None        # why connect() did not get in, when it did not
        self.stop_requested = asyncio.Event()
        self.on_command: Callable[[str], None] | None = None     # "pause" / "resume" from the coordinator
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._t0: asyncio.Future[int] | None = None
        self._seal: auth.LineSeal | None = None       # task → coordinator
        self._opener: auth.LineSeal | None = None     # coordinator → task

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self) -> None:
        if self.endpoint is None:
            return
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.wait_for(self._open(self.endpoint), CONNECT_TIMEOUT_S)
        except (OSError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError, auth.AuthError) as exc:
            self.problem = exc.reason if isinstance(exc, auth.AuthError) else (
                "no answer" if isinstance(exc, asyncio.TimeoutError) else f"{type(exc).__name__}: {exc}")
            self._writer = self._seal = None
            return
        self._writer = writer
        self._reader_task = asyncio.get_running_loop().create_task(self._read(reader))

    async def _open(self, endpoint: ControlEndpoint) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect, check the coordinator's certificate (TLS), answer its challenge, check its proof."""
        context = None if endpoint.tls_sha256 is None else tls.client_context()
        reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port, limit=MAX_LINE + auth.MAC_HEX + 2,
                                                       ssl=context)
        try:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if endpoint.tls_sha256 is not None and not tls.pinned(writer.get_extra_info("ssl_object"), endpoint.tls_sha256):
                raise auth.AuthError("the coordinator's TLS certificate is not the one in the task plan")
            answer, server_nonce, client_nonce = auth.answer(endpoint.secret, await reader.readline(), auth.identity())
            writer.write(answer)
            auth.check_welcome(endpoint.secret, server_nonce, client_nonce, await reader.readline())
        except BaseException:
            writer.close()
            raise
        self._seal = auth.LineSeal(endpoint.secret, server_nonce, client_nonce, auth.TO_COORDINATOR)
        self._opener = auth.LineSeal(endpoint.secret, server_nonce, client_nonce, auth.TO_TASK)
        return reader, writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        opener = self._opener
        try:
            while opener is not None and (line := await reader.readline()):
                try:
                    answer = parse_answer(opener.open(line))
                except auth.AuthError:
                    if self._writer is not None:    # not the coordinator's line: this connection is not to be trusted
                        self._writer.close()
                    break
                except CodecError:
                    continue                    # not from a coordinator of this version: nothing to follow
                if answer == STOP:
                    self.stop_requested.set()
                elif isinstance(answer, StartAt):
                    if self._t0 is not None and not self._t0.done():
                        self._t0.set_result(answer.t0_ns)
                elif isinstance(answer, Command) and self.on_command is not None:
                    self.on_command(answer.word)
        except (OSError, ValueError, asyncio.IncompleteReadError):   # ValueError: a line over the limit
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
        self.send(Ready(cluster, task, proposal_ns))
        return await self._t0

    def send(self, line: TaskLine) -> None:
        if self._writer is None or self._writer.is_closing() or self._seal is None:
            return
        if self.attempt is not None:
            line = dataclasses.replace(line, attempt=self.attempt)
        self._writer.write(self._seal.seal(line.to_line()))

    def hello(self, cluster: str, task: int) -> None:
        """Say who this is (task, attempt, host, pid) as soon as connected, before any other line."""
        self.send(Hello(cluster, task, socket.gethostname(), os.getpid()))

    async def aclose(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
