"""The report's plots over two processes (rbench.report.draw): every result, in order, an error raised here."""
from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from rbench.report import draw


def _pid() -> int:
    return os.getpid()


def test_the_expensive_plots_are_drawn_in_a_child_and_the_rest_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(draw.os, "cpu_count", lambda: 2)
    jobs: dict[str, Callable[[], int]] = {"throughput": _pid, "latency": _pid, "confirm": _pid, "timeline": _pid}
    got = draw.draw_all(jobs)
    assert list(got) == list(jobs)
    assert got["throughput"] == got["timeline"] == os.getpid()
    assert got["latency"] == got["confirm"] != os.getpid()


def test_one_core_draws_everything_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(draw.os, "cpu_count", lambda: 1)
    assert set(draw.draw_all({"throughput": _pid, "latency": _pid}).values()) == {os.getpid()}


def test_a_plot_that_fails_in_the_child_is_drawn_again_here_and_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(draw.os, "cpu_count", lambda: 2)
    calls: list[int] = []

    def broken() -> int:
        calls.append(os.getpid())
        raise ValueError("no rows to draw")

    with pytest.raises(ValueError, match="no rows to draw"):
        draw.draw_all({"throughput": _pid, "latency": broken})
    assert calls == [os.getpid()]           # the child's attempt is not seen here; this process's raised
