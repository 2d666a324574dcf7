"""The report's plots drawn on two cores: half in a forked child, half here.

A report's PNGs are ~3.5 s of matplotlib CPU on this 2-core machine (tight_layout, text layout and the
Agg rasteriser; docs/timing.md), single-threaded, after the load has ended and the cores are free.
Each plot is a function of rows already in memory that writes one file, so a child forked from this
process draws its share from the same rows (nothing pickled but the returned paths) while this process
draws the rest. A child that fails or dies leaves its plots to be drawn here, so an error surfaces with
its own traceback, as it would have without the child.
"""
from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TypeVar

T = TypeVar("T")
# the expensive plots go to the child; the rest here (measured: the two latency plots and the knee ≈ the others)
CHILD_FIRST = ("latency", "confirm", "knee")


def draw_all(jobs: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Every job's result by name, the jobs split over this process and one forked child when there are two
    cores and fork exists (else all here, in order)."""
    child_jobs = {k: f for k, f in jobs.items() if k in CHILD_FIRST}
    if len(jobs) < 2 or not child_jobs or (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return {k: f() for k, f in jobs.items()}
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_draw_in_child, args=(child_jobs, send), name="rbench-report-plots", daemon=True)
    child.start()
    send.close()
    try:
        out = {k: f() for k, f in jobs.items() if k not in child_jobs}
        drawn: dict[str, T] = _received(receive)
    finally:
        receive.close()
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join()
    for k, f in child_jobs.items():
        out[k] = drawn[k] if k in drawn else f()
    return {k: out[k] for k in jobs}


def _draw_in_child(jobs: dict[str, Callable[[], T]], send: Connection) -> None:
    """The child's share; only what it drew is sent back (the parent redraws the rest and raises their errors)."""
    drawn: dict[str, T] = {}
    try:
        for k, f in jobs.items():
            drawn[k] = f()
    except BaseException:           # the parent draws it again and raises it there
        pass
    send.send(drawn)
    send.close()


def _received(receive: Connection) -> dict[str, T]:
    """What the child sent ({} when it died before sending)."""
    try:
        got: dict[str, T] = receive.recv()
    except (EOFError, OSError):
        return {}
    return got
