"""A TCP forwarder in front of the broker that tests can cut, pause and slow down.

Fault tests need a network that misbehaves on cue: a connection that dies mid-publish,
a broker that stops answering without closing anything, a link with 20 ms more latency.
`TcpProxy` listens on 127.0.0.1:<free port> and relays every accepted connection to the
upstream (host, port); the test points its URI at the proxy (``proxy.uri(url)``) and
then calls ``cut()``, ``pause()``/``resume()`` or sets ``latency``.

It runs its own asyncio loop on a thread, so it keeps forwarding whatever the test's
loop does (blocked in a callback, uvloop or asyncio), and its controls are synchronous:
when ``pause()`` returns, no further byte is forwarded. Each direction of a connection
is a reader task that stamps every chunk with when it may leave (now + latency) and a
writer task that sends chunks in order once due, so latency is added per chunk without
limiting throughput. Not a load-bearing relay: it buffers without bound while paused.
"""
from __future__ import annotations

import asyncio
import collections
import ssl
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

T = TypeVar("T")
CHUNK = 65536


class _Direction:
    """One way of one connection: chunks read from ``src`` wait in ``queue`` until due."""

    def __init__(self, proxy: TcpProxy, name: str, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.name = name
        self.src = src
        self.dst = dst
        self.queue: collections.deque[tuple[float, bytes | None]] = collections.deque()
        self.ready = asyncio.Event()          # something in the queue

    async def read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await self.src.read(CHUNK):
                self.queue.append((loop.time() + self.proxy._latency, data))
                self.ready.set()
        except (ConnectionError, OSError):
            pass
        self.queue.append((loop.time() + self.proxy._latency, None))   # EOF travels with the same delay
        self.ready.set()

    async def write(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not self.queue:
                    self.ready.clear()
                    await self.ready.wait()
                    continue
                due, data = self.queue[0]
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
                await self.proxy._flowing.wait()
                self.queue.popleft()
                if data is None:
                    if self.dst.can_write_eof():
                        self.dst.write_eof()
                    else:
                        self.dst.close()
                    return
                self.proxy.forwarded[self.name] += len(data)     # counted before the peer can see it
                self.dst.write(data)
                await self.dst.drain()
        except (ConnectionError, OSError):
            pass


class _Pair:
    """A client connection and the upstream connection made for it."""

    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.writers = (client, upstream)
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self) -> None:
        for task in self.tasks:
            task.cancel()
        for writer in self.writers:
            writer.transport.abort()


class TcpProxy:
    """Relay 127.0.0.1:<port> → ``upstream``; ``cut()``, ``pause()``, ``resume()``, ``latency``.

    With ``ssl`` (a server SSLContext) the proxy terminates TLS and relays plain TCP:
    an amqps:// endpoint in front of a broker that has no TLS listener.
    """

    def __init__(self, upstream: tuple[str, int], ssl: ssl.SSLContext | None = None) -> None:
        self.upstream = upstream
        self._ssl = ssl
        self._latency = 0.0
        self._pairs: set[_Pair] = set()
        self.accepted = 0
        self.forwarded = {"up": 0, "down": 0}     # bytes relayed client→broker and broker→client
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"tcp-proxy→{upstream[1]}", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._flowing: asyncio.Event

    # ------------------------------------------------------------ life cycle
    def start(self) -> TcpProxy:
        self._thread.start()

        async def listen() -> int:
            self._flowing = asyncio.Event()
            self._flowing.set()
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self._ssl)
            return int(self._server.sockets[0].getsockname()[1])

        self.port = self._call(listen())
        return self

    def close(self) -> None:
        """Stop listening, abort every connection, stop the thread."""
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for pair in list(self._pairs):
                pair.abort()
            self._pairs.clear()

        self._call(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ controls
    def uri(self, uri: str) -> str:
        """``uri`` with its host and port replaced by the proxy's (credentials, path, query kept)."""
        parts = urlsplit(uri)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def cut(self) -> int:
        """Abort every open connection, both sides, at once (new ones are still accepted); how many."""
        async def cut() -> int:
            pairs = list(self._pairs)
            for pair in pairs:
                pair.abort()
            self._pairs.clear()
            return len(pairs)

        return self._call(cut())

    def pause(self) -> None:
        """Hold every byte in both directions (connections stay open) until ``resume()``."""
        async def pause() -> None:
            self._flowing.clear()

        self._call(pause())

    def resume(self) -> None:
        async def resume() -> None:
            self._flowing.set()

        self._call(resume())

    @property
    def latency(self) -> float:
        """Seconds every chunk waits in the proxy before it is forwarded (each direction)."""
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        self._latency = max(0.0, float(seconds))

    @property
    def connections(self) -> int:
        """Connections open through the proxy right now."""
        return len(self._pairs)

    # ------------------------------------------------------------ internals
    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.transport.abort()
            return
        pair = _Pair(client_w, up_w)
        self._pairs.add(pair)
        for d in (_Direction(self, "up", client_r, up_w), _Direction(self, "down", up_r, client_w)):
            pair.tasks += [asyncio.get_running_loop().create_task(d.read()),
                           asyncio.get_running_loop().create_task(d.write())]
        # both writers done (EOF relayed each way) or cut: close what is left
        await asyncio.gather(*pair.tasks, return_exceptions=True)
        if pair in self._pairs:
            self._pairs.discard(pair)
            for writer in pair.writers:
                writer.close()


MakeProxy = Callable[..., TcpProxy]     # the tcp_proxy fixture: (upstream, ssl=None) → a started proxy


def host_port(url: str, default_port: int) -> tuple[str, int]:
    """(host, port) a URI points at, for a proxy's upstream."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port
