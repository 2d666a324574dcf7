"""The rate search's decisions (rbench.coordinator.rate_search), against a cluster of known capacity."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.config.model import RateSearch
from rbench.coordinator import rate_search as rsm
from rbench.errors import ConfigError


def _search(**kw: Any) -> RateSearch:
    return RateSearch(**{"start": 100, "max": 100_000, "precision": 0.05, **kw})


def test_doubles_then_bisects_until_the_bracket_is_within_the_precision() -> None:
    s = _search()
    assert rsm.next_rate(s, [100], []) == 200
    assert rsm.next_rate(s, [100, 200, 400], [800]) == 600
    assert rsm.next_rate(s, [100, 200, 400, 600], [800]) == 700
    assert rsm.next_rate(s, [760], [790]) is None                  # (790 − 760) / 760 < 5 %
    assert rsm.next_rate(s, [], [100]) is None                     # the first probe failed
    assert rsm.next_rate(_search(max=300), [200], []) == 300       # capped at max …
    assert rsm.next_rate(_search(max=300), [200, 300], []) is None  # … and met there: capacity not reached


@pytest.mark.parametrize("capacity", [130.0, 777.0, 5_000.0])
def test_the_answer_brackets_a_known_capacity(capacity: float, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A fake cluster that meets the SLO below `capacity` msg/s: the search ends with last pass ≤ capacity < first fail."""
    w = workload_from_dict({"name": "s", "clusters": [{"name": "c", "uris": ["amqp://127.0.0.1/"]}], "producers": 2,
                            "rate_search": {"start": 50, "max": 10_000, "step": 5, "precision": 0.1}})

    def judge(run_dir: Path, p99: float, ratio: float, producers: int, rate: float) -> rsm.Probe:
        ok = rate * producers <= capacity
        return rsm.Probe(rate, rate * producers, run_dir.name, rate * producers, 1.0, 0.1, ok, "fake")

    monkeypatch.setattr(rsm, "judge_probe", judge)
    rates: list[float] = []

    def run_probe(probe_w: Any) -> Path:
        assert probe_w.rate_search is None and probe_w.duration == 5 and len(probe_w.steps()) == 1
        rates.append(probe_w.rate)
        return tmp_path / f"probe{len(rates)}"

    answer = rsm.search_cluster(w, run_probe)
    assert answer.highest_pass is not None and answer.first_fail is not None
    assert answer.highest_pass <= capacity < answer.first_fail
    assert (answer.first_fail - answer.highest_pass) / answer.highest_pass <= 0.1
    assert len(answer.probes) == len(rates) and answer.ended_by == "bracket within the precision"
    assert "highest rate that met the SLO" in answer.line()


def test_rate_search_excludes_fixed_rates() -> None:
    base = {"name": "s", "clusters": [{"name": "c", "uris": ["amqp://127.0.0.1/"]}],
            "rate_search": {"start": 50, "max": 100}}
    for other in ({"rate": 10}, {"duration": 5}, {"rate_steps": [{"rate": 1, "duration": 1}]}):
        with pytest.raises(ConfigError, match="rate_search: give rate_search or"):
            workload_from_dict({**base, **other})
    with pytest.raises(ConfigError, match="max: expected at least start"):
        workload_from_dict({**base, "rate_search": {"start": 50, "max": 10}})


def test_a_generator_bound_probe_ends_the_search_without_claiming_capacity(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    w = workload_from_dict({"name": "s", "clusters": [{"name": "c", "uris": ["amqp://127.0.0.1/"]}],
                            "rate_search": {"start": 100, "max": 10_000, "step": 5}})

    def judge(run_dir: Path, p99: float, ratio: float, producers: int, rate: float) -> rsm.Probe:
        limit = "a task used 97% of a core: the load generator was the limit" if rate >= 400 else None
        return rsm.Probe(rate, rate, run_dir.name, rate, 1.0, 0.1, rate < 400, "fake", limit)

    monkeypatch.setattr(rsm, "judge_probe", judge)
    answer = rsm.search_cluster(w, lambda probe_w: tmp_path / str(probe_w.rate))
    assert [p.rate for p in answer.probes] == [100, 200, 400]
    assert answer.highest_pass == 200 and answer.first_fail is None
    assert answer.ended_by.startswith("stopped: at 400 msg/s a task used 97% of a core")
    assert "capacity not reached" not in answer.line() and "no failure the broker caused yet" in answer.line()


def test_a_first_probe_the_generator_could_not_carry_is_an_answer_without_a_bracket(monkeypatch: pytest.MonkeyPatch,
                                                                                   tmp_path: Path) -> None:
    """Neither a pass nor a failure the broker caused: the line says so instead of formatting a missing rate."""
    w = workload_from_dict({"name": "s", "clusters": [{"name": "c", "uris": ["amqp://127.0.0.1/"]}],
                            "rate_search": {"start": 100, "max": 10_000, "step": 5}})

    def judge(run_dir: Path, p99: float, ratio: float, producers: int, rate: float) -> rsm.Probe:
        return rsm.Probe(rate, rate, run_dir.name, rate * 0.8, 1.0, 0.1, False, "fake", "the load generator was the limit")

    monkeypatch.setattr(rsm, "judge_probe", judge)
    answer = rsm.search_cluster(w, lambda probe_w: tmp_path / str(probe_w.rate))
    assert (answer.highest_pass, answer.first_fail, len(answer.probes)) == (None, None, 1)
    assert answer.line().startswith("c: no probe met the SLO; stopped: at 100 msg/s the load generator was the limit")
