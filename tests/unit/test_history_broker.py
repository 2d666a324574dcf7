"""The broker version in the nightly history: recorded per night from run.json, shown by `rbench history`, and
named beside a regression whose nights ran on another broker than the nights before."""
from __future__ import annotations

from pathlib import Path

import pytest

from rbench.cli import main
from rbench.history.regress import Finding
from tests.synthetic_history import noisy, write_history

UPGRADE = ["3.10.8"] * 24 + ["4.0.5"] * 6


def test_history_shows_each_nights_broker_and_where_it_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hist = tmp_path / "h"
    write_history(hist, tmp_path / "runs", noisy(30, seed=11), brokers=UPGRADE)
    assert main(["history", "show", "--history", str(hist), "--metric", "consume_rate"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("2030-")]
    assert len(rows) == 30
    assert all(" / 3.10.8 / " in r for r in rows[:24]) and all(" / 4.0.5 / " in r for r in rows[24:])
    changed = [i for i, r in enumerate(rows) if "broker changed" in r]
    assert changed == [24] and rows[24].endswith("(broker changed 3.10.8 → 4.0.5)")


def test_a_regression_across_a_broker_upgrade_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hist = tmp_path / "h"
    runs = write_history(hist, tmp_path / "runs", noisy(30, seed=11, drop_at=24), brokers=UPGRADE)
    codes = [main(["regress", "--history", str(hist), "--run", tonight, "--metrics", "consume_rate",
                   "--out", str(tmp_path / "out" / tonight)]) for tonight in runs[24:27]]
    assert 1 in codes, codes
    first = runs[24 + codes.index(1)]
    md = (tmp_path / "out" / first / "regress.md").read_text()
    assert "| **REGRESSION** (broker changed 3.10.8 → 4.0.5) |" in md
    (reason,) = [ln for ln in md.splitlines() if ln.startswith("- **c3 step 1 consume_rate**")]
    assert "; broker changed 3.10.8 → 4.0.5. Shift began: 2030-03-25" in reason and "broker 4.0.5" in reason


def test_the_same_drop_on_one_broker_names_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hist = tmp_path / "h"
    runs = write_history(hist, tmp_path / "runs", noisy(30, seed=11, drop_at=24), brokers=["4.0.5"] * 30)
    codes = [main(["regress", "--history", str(hist), "--run", tonight, "--metrics", "consume_rate",
                   "--out", str(tmp_path / "out" / tonight)]) for tonight in runs[24:27]]
    assert 1 in codes
    assert "broker changed" not in capsys.readouterr().out


@pytest.mark.parametrize("versions, start, said", [
    (["3.10.8", "3.10.8", "4.0.5"], 2, "broker changed 3.10.8 → 4.0.5"),
    (["3.10.8", "4.0.5", "4.0.5"], 2, None),                 # changed before the shift: not this regression's
    (["3.10.8", None, "4.0.5"], 2, "broker changed 3.10.8 → 4.0.5"),    # a night that did not record it is skipped
    (["3.10.8", "3.10.8", "3.10.8"], 2, None),
    ([None, None, "4.0.5"], 2, None),                       # nothing to compare with
    (["3.10.8", "3.10.8", "4.0.5"], None, "broker changed 3.10.8 → 4.0.5"),   # no night of change: tonight
])
def test_broker_change_compares_the_shift_with_the_night_before(versions: list[str | None], start: int | None,
                                                                said: str | None) -> None:
    f = Finding("c", 0, "consume_rate", ["n1", "n2", "n3"], [1.0, 1.0, 1.0], [{"broker_version": v} for v in versions],
                None, night_of_change=start)
    assert f.broker_change == said


def test_the_recorded_version_wins_over_the_flag_which_fills_in_older_runs() -> None:
    from rbench.history.store import run_metadata
    from rbench.samples.record import RunRecord

    recorded = RunRecord.from_json({"clusters": [{"name": "c", "broker": {"version": "4.0.5"}}]})
    older = RunRecord.from_json({"clusters": [{"name": "c"}]})
    assert run_metadata(recorded, None, "3.10.8")["c"]["broker_version"] == "4.0.5"
    assert run_metadata(older, None, "3.10.8")["c"]["broker_version"] == "3.10.8"
