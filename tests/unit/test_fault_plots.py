"""Faults drawn on the report's plots: where the shading starts and ends (rbench.report.fault_plots, timeline_plots, broker_plots)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from rbench.report import fault_plots, timeline_plots
from rbench.report.broker_plots import broker_plot

KILL = {"run_id": "r", "cluster": "a", "index": 0, "action": "kill", "node": "rabbit-2", "at_s": 10.25, "end_s": 10.3,
        "back_start_s": 20.0, "back_s": 20.1, "baseline_consume_rate": 200.0, "consume_back_s": 3.75, "first_confirm_s": 0.42,
        "series": [{"second": s, "t_s": s - 10.25, "published": 200, "confirmed": 200, "consumed": 0 if 11 <= s < 14 else 200}
                   for s in range(0, 30)]}
STOP = {**KILL, "index": 1, "action": "stop", "node": "rabbit-3", "at_s": 25.5, "end_s": 25.6, "back_start_s": None,
        "back_s": None, "consume_back_s": None, "first_confirm_s": None, "baseline_consume_rate": None}


def _spans(ax: Any) -> list[tuple[float, float]]:
    return [(round(p.get_x(), 6), round(p.get_x() + p.get_width(), 6)) for p in ax.patches]


@pytest.mark.parametrize(("fault", "origin", "want"), [
    (KILL, 0.0, [(10.25, 20.1), (10.3, 20.0)]),            # until back; node down from the action's end to the restart
    (KILL, 10.25, [(0.0, 9.85), (0.05, 9.75)]),            # on the fault's own axis
    (STOP, 0.0, [(25.5, 31.0), (25.6, 31.0)]),             # never back: to the right edge given
])
def test_shading(fault: dict[str, Any], origin: float, want: list[tuple[float, float]]) -> None:
    fig, ax = plt.subplots()
    fault_plots.shade_fault(ax, fault, origin, 31.0)
    assert _spans(ax) == want
    plt.close(fig)


def test_every_plot_draws_the_faults(tmp_path: Path) -> None:
    timeline = [{"run_id": "r", "cluster": "a", "second": s, "published": 200, "consumed": 200, "e2e_p50_ms": 3.0,
                 "e2e_p99_ms": 4.0, "e2e_max_ms": 5.0} for s in range(30)]
    steps = [{"run_id": "r", "cluster": "a", "step": 0, "start_ns": 0, "warmup_s": 2.0}]
    broker = [{"run_id": "r", "cluster": "a", "second": float(s), "depth": 10.0, "memory_bytes": 2.0**27, "cpu_cores": 0.5}
              for s in range(30)]
    for path in (timeline_plots.timeline_plot(timeline, steps, tmp_path / "t.png", faults=[KILL, STOP]),
                 fault_plots.fault_plot([KILL, STOP], tmp_path / "f.png"),
                 broker_plot(timeline, broker, [], tmp_path / "b.png", faults=[KILL, STOP])):
        assert path.stat().st_size > 10_000
