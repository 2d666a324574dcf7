"""Warnings that the task's own code logs reach the user's terminal, not only an executor's log.

A driver that has to work around something (an exchange that exists with the other durability, used as it is)
says so with ``logging``; on a cluster that line lands in the executor's stderr, which nobody reads during a
run. For the task's lifetime this handler forwards every WARNING (and worse) of the ``rbench`` loggers to the
coordinator as a control line (rbench.live.control.wire.Notice); the coordinator prints each text once per
cluster (rbench.coordinator.run). The executor's log keeps the line too.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rbench.live.control.wire import Notice

WATCHED = "rbench"


class _Forward(logging.Handler):
    def __init__(self, send: Callable[[Notice], None], cluster: str, task: int) -> None:
        super().__init__(logging.WARNING)
        self.send, self.cluster, self.task = send, cluster, task
        self.loop, self.thread = asyncio.get_running_loop(), threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        notice = Notice(self.cluster, self.task, record.getMessage()[:Notice.MAX_CHARS])
        try:
            if threading.get_ident() == self.thread:
                self.send(notice)
            else:          # the control connection's writer belongs to the task's loop
                self.loop.call_soon_threadsafe(self.send, notice)
        except Exception:
            pass


@contextmanager
def forwarded(send: Callable[[Notice], None], cluster: str, task: int) -> Iterator[None]:
    """Forward the ``rbench`` loggers' warnings to ``send`` while the block runs (inside the task's loop)."""
    handler = _Forward(send, cluster, task)
    logger = logging.getLogger(WATCHED)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
