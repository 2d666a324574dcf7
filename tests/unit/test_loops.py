"""The `run` fixture really runs each test on the loop kind in its id (tests/loops.py)."""
from __future__ import annotations

import asyncio

import pytest
import uvloop

from tests.loops import LoopRunner, loop_factory


def test_run_uses_the_loop_kind_it_is_parametrized_with(run: LoopRunner, loop_kind: str) -> None:
    async def kind() -> type:
        return type(asyncio.get_running_loop())

    got = run(kind())
    assert issubclass(got, uvloop.Loop) == (loop_kind == "uvloop")
    assert run.kind == loop_kind


@pytest.mark.loops("uvloop")
def test_a_loops_marker_narrows_the_kinds(run: LoopRunner, loop_kind: str) -> None:
    assert loop_kind == "uvloop" and run(asyncio.sleep(0, "done")) == "done"


def test_timeout_bounds_the_coroutine(run: LoopRunner) -> None:
    with pytest.raises(asyncio.TimeoutError):
        run(asyncio.sleep(5), timeout=0.05)


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="loop kind"):
        loop_factory("trio")
