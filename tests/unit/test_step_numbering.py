"""Printed step numbers count from 1 while the data keeps the 0-based index (rbench.samples.conventions)."""
from __future__ import annotations

from typing import Any

from rbench.report.leaderboard_md import leaderboard_markdown
from rbench.report.plot_style import step_ticks
from rbench.report.render import STEP_COLUMNS, steps_table_html
from rbench.samples.conventions import shown_step


def _step(step: int, target: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {k: None for k, _ in STEP_COLUMNS}
    row.update(run_id="r1", cluster="c1", step=step, target_rate=target, consume_rate=100.0 * (step + 1), matched=True)
    return row


def test_first_step_is_printed_as_step_1() -> None:
    assert shown_step(0) == 1
    html = steps_table_html([_step(0, 100.0), _step(1, 200.0)])
    assert "<tr><td>r1</td><td>c1</td><td>1</td>" in html and "<tr><td>r1</td><td>c1</td><td>2</td>" in html
    assert "<td>c1</td><td>0</td>" not in html
    assert step_ticks([_step(0, 100.0), _step(1, None)]) == ([1, 2], ["step 1\n100/s", "step 2\nunlimited"])


def test_leaderboard_prints_steps_from_1() -> None:
    top = {"cluster": "c1", "run_id": "r1", "step": 0, "target_rate": 100.0, "consume_rate": 99.0, "e2e_p99_ms": 2.0,
           "matched": True}
    board = {"prices": {"currency": "USD", "hours_per_month": 730, "path": "costs.yaml", "source": "test"},
             "top_throughput": [top], "highest_matched": [top], "cost_at_top": [], "costs": [], "target_rate": None}
    meta = {"runs": [{"run_id": "r1", "status": "complete"}], "rate_method": "rate", "match_rule": "rule"}
    md = leaderboard_markdown(board, [], meta)
    rows = [line for line in md.splitlines() if line.startswith("| 1 | c1 |")]
    assert len(rows) == 2 and all(line.startswith("| 1 | c1 | 1 |") for line in rows)
