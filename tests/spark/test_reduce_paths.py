"""Small samples run the reduce's numpy passes (step latencies, message checks) on the driver; large ones in
Spark tasks. Both must give every figure identically: the other reduce tests run only the driver path
(their runs are small), so here each synthetic run is reduced both ways and compared field by field."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic_run import SynthSpec, make_fault_run, make_run

from rbench.reduce import stats


def _both_ways(spark: Any, run_dir: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    from rbench.reduce.job import reduce_runs

    seen: list[bool] = []
    real = stats.on_driver

    def spy(samples: Any) -> bool:
        seen.append(real(samples))
        return seen[-1]

    monkeypatch.setattr(stats, "on_driver", spy)
    small = reduce_runs([run_dir], session=spark, out=out / "driver", render=False)
    assert seen and all(seen), "a synthetic run is small: its passes ran on the driver"
    seen.clear()
    monkeypatch.setenv(stats.DRIVER_MEMORY_ENV, "0")       # a budget of 0 bytes: every pass in Spark
    large = reduce_runs([run_dir], session=spark, out=out / "spark", render=False)
    assert seen and not any(seen), "with the threshold below the run's rows, the passes ran in Spark tasks"
    return small, large


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert x == y


def test_steps_and_timeline_are_the_same_either_way(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    run = make_run(tmp_path / "runs", SynthSpec())
    small, large = _both_ways(spark, run.run_dir, tmp_path, monkeypatch)
    _same(small.steps, large.steps)
    assert small.notes == large.notes and small.clusters == large.clusters
    _same(pq.read_table(small.out_dir / "timeline.parquet").to_pylist(), pq.read_table(large.out_dir / "timeline.parquet").to_pylist())


def test_fault_figures_are_the_same_either_way(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_fault_run(tmp_path / "faultruns")
    small, large = _both_ways(spark, run.run_dir, tmp_path, monkeypatch)
    _same(small.steps, large.steps)
    _same(small.faults, large.faults)


def test_fanout_routes_are_the_same_either_way(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_fanout_reduce import QUEUES, _fanout_run

    for routes in ({"0": QUEUES}, {"0": QUEUES, "9": []}, None):
        root = tmp_path / str(len(routes or {}))
        small, large = _both_ways(spark, _fanout_run(root, routes), root, monkeypatch)
        _same(small.steps, large.steps)
        monkeypatch.undo()
