"""Run a test's coroutines on either event loop rbench supports: asyncio's or uvloop's.

Executors run on uvloop and rbench falls back to asyncio when uvloop is missing; the two
differ where drivers live (uvloop's transports call ``BufferedProtocol`` differently, buffer
writes differently and report a lost peer at other moments). So every async test in
tests/unit and tests/broker takes the ``run`` fixture (tests/conftest.py), which pytest
parametrizes over both kinds: ``test_x[asyncio]`` and ``test_x[uvloop]``. A test or module
marked ``@pytest.mark.loops("uvloop")`` runs on the kinds it names only (slow broker tests,
whose docstring says so). This is how uvloop's own suite runs each test on both loops.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

LOOP_KINDS: tuple[str, ...] = ("asyncio", "uvloop")
T = TypeVar("T")


def loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A function making a fresh event loop of ``kind`` ("asyncio" or "uvloop")."""
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    if kind == "asyncio":
        return asyncio.new_event_loop
    raise ValueError(f"loop kind: expected one of {', '.join(LOOP_KINDS)}, got {kind!r}")


class LoopRunner:
    """``run(coro)``: run ``coro`` to completion on a new loop of one kind, as ``asyncio.run`` does.

    Each call gets its own loop (closed afterwards, with leftover tasks cancelled), so a
    test can call it several times. ``timeout`` bounds the coroutine (``asyncio.wait_for``).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factory = loop_factory(kind)

    def __call__(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        async def bounded() -> T:
            return await asyncio.wait_for(coro, timeout)

        with asyncio.Runner(loop_factory=self._factory) as runner:
            return runner.run(bounded() if timeout is not None else coro)

    def __repr__(self) -> str:
        return f"LoopRunner({self.kind!r})"
