"""Order and copies with two consumers on one queue (rbench.reduce.message_checks): competing consumers of a classic
queue are judged in order per consumer, as RabbitMQ keeps it; two plain readers of a stream each expect every
message once. Each run is reduced on the driver and in Spark tasks and must give the same, exact figures."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic_run import READERS_N, make_readers_run
from test_reduce_paths import _both_ways, _same

N = READERS_N
FIGURES = ("deliveries", "redelivered", "expected", "consumed_unique", "duplicated", "lost", "reordered")


def _reduced(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str) -> tuple[dict[str, Any], dict[str, Any]]:
    small, large = _both_ways(spark, make_readers_run(tmp_path / "runs", shape), tmp_path, monkeypatch)
    _same(small.steps, large.steps)
    assert small.clusters == large.clusters
    (step,) = small.steps
    (cluster,) = small.clusters
    return {k: step[k] for k in FIGURES}, cluster


def test_competing_consumers_interleave_without_a_reorder(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # judged over both consumers together, nearly every message of the lagging one read as reordered
    step, cluster = _reduced(spark, tmp_path, monkeypatch, "competing")
    assert step == {"deliveries": N + 1, "redelivered": 1, "expected": N, "consumed_unique": N, "duplicated": 1,
                    "lost": 0, "reordered": 2}
    assert (cluster["run_deliveries"], cluster["run_consumed_unique"], cluster["run_duplicated"]) == (N + 1, N, 1)


@pytest.mark.parametrize("shape", ["stream", "super"])
def test_each_plain_reader_of_a_stream_expects_every_message(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             shape: str) -> None:
    # once per queue, the other reader's copies were all duplicates, its gap hidden and its order mixed in
    step, cluster = _reduced(spark, tmp_path, monkeypatch, shape)
    assert step == {"deliveries": 2 * N, "redelivered": 0, "expected": 2 * N, "consumed_unique": 2 * N - 1,
                    "duplicated": 1, "lost": 1, "reordered": 1}
    assert (cluster["run_deliveries"], cluster["run_consumed_unique"], cluster["run_duplicated"]) == (2 * N, 2 * N - 1, 1)


def test_a_single_active_group_is_one_reader(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    step, _ = _reduced(spark, tmp_path, monkeypatch, "stream-sac")
    assert step == {"deliveries": 2 * N, "redelivered": 0, "expected": N, "consumed_unique": N, "duplicated": N - 1,
                    "lost": 0, "reordered": 1}
