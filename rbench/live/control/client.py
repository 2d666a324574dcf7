"""The task's end of the control channel: it sends its lines (rbench.live.control.wire) and follows the
coordinator's answers: stop, pause/resume of its consumers, and the start gate's t0.

The channel is best-effort: a task that cannot reach the coordinator still runs (the start then goes
through Spark's allGather, rbench.runtime.start)."""
from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from collections.abc import Callable

from rbench.errors import CodecError
from rbench.live.control.wire import MAX_LINE, STOP, Command, Hello, Ready, StartAt, TaskLine, parse_answer


class ControlClient:
    """Task side: sends progress lines; `stop_requested` is set when the driver says stop."""

    def __init__(self, address: tuple[str, int] | None, attempt: int | None = None) -> None:
        """``attempt`` (the task's Spark attempt id) goes into every line sent: the driver tells attempts apart."""
        self.address = address
        self.attempt = attempt
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
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*self.address, limit=MAX_LINE + 1), 5)
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
                try:
                    answer = parse_answer(line)
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
        if self._writer is None or self._writer.is_closing():
            return
        if self.attempt is not None:
            line = dataclasses.replace(line, attempt=self.attempt)
        self._writer.write(line.to_line())

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
