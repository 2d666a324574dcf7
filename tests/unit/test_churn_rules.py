"""Churn's workload fields, its run.json record and the reduce's per-step figures (no broker)."""
from __future__ import annotations

from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.config.types import ChurnSpec
from rbench.errors import ConfigError
from rbench.plan import step_windows
from rbench.reduce.churn import baseline, step_figures
from rbench.samples.churn import ChurnStats


def workload(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "t", "clusters": [{"name": "c", "uris": ["amqp://127.0.0.1/"]}],
                            "rate_steps": [{"rate": 10, "duration": 5}, {"rate": 10, "duration": 5}]}
    return {**base, **over}


def test_a_step_churn_overrides_the_workload_one_and_rate_0_turns_it_off() -> None:
    w = workload_from_dict(workload(churn={"rate": "5/s"}, rate_steps=[
        {"rate": 10, "duration": 5}, {"rate": 10, "duration": 5, "churn": {"rate": "50/s", "declare": True}},
        {"rate": 10, "duration": 5, "churn": {"rate": 0}}]))
    churns = [s.churn for s in step_windows(w)]
    assert churns == [ChurnSpec(5.0, True, False), ChurnSpec(50.0, True, True), None]
    assert churns[1] is not None and churns[1].describe() == "open, channel, declare, close"


def test_churn_is_refused_with_one_line_for_drivers_without_it_and_for_bad_rates() -> None:
    with pytest.raises(ConfigError, match=r"churn: honoured by the amqp091 driver only \(this workload uses aiopika\)"):
        workload_from_dict(workload(driver="aiopika", churn={"rate": 5}))
    with pytest.raises(ConfigError, match="churn.rate"):
        workload_from_dict(workload(churn={"rate": "fast"}))
    with pytest.raises(ConfigError, match="churn.rate"):
        workload_from_dict(workload(churn={"rate": 5000}))


def test_churn_stats_round_trip_join_and_window() -> None:
    a = ChurnStats((1, 5), (10, 20), (30, 40), (7,), (9,))
    b = ChurnStats((3,), (15,), (35,), (), ())
    assert ChurnStats.from_json(a.to_json(), "churn") == a
    both = ChurnStats.total([a, b])
    w = both.window(2, 8)
    assert w.at_us == (5, 3) and w.connect_us == (20, 15) and w.failed_at_us == (7,) and w.skipped_at_us == ()


def row(step: int, rate: float, cpu: float | None, p99: float, start_s: float, end_s: float) -> dict[str, Any]:
    return {"step": step, "target_rate": rate, "broker_cpu_s": cpu, "e2e_p50_ms": p99 / 2, "e2e_p99_ms": p99,
            "meas_start_ns": int(start_s * 1e9), "meas_end_ns": int(end_s * 1e9)}


def test_broker_cpu_per_churned_connection_is_the_rise_over_the_baseline_step_rate() -> None:
    rows = [row(0, 10, 2.0, 4.0, 0, 10), row(1, 20, 9.0, 9.0, 10, 20), row(2, 10, 4.0, 8.0, 20, 30)]
    # 100 churned connections in step 3's window (20-30 s after t0), one failed; step 2 is at another rate
    stats = ChurnStats(tuple(range(20_000_000, 30_000_000, 100_000)), (1000,) * 100, (2000,) * 100, (25_000_000,), ())
    out = step_figures(rows, 0, {2: 5.0}, stats, tasks=2)
    assert out[0]["churned"] is None and out[1]["churn_target_per_s"] is None
    f = out[2]
    assert f["churn_target_per_s"] == 10.0 and f["churned"] == 100 and f["churn_failed"] == 1
    assert f["churn_per_s"] == pytest.approx(10.0)
    assert f["churn_baseline_step"] == 0
    assert f["broker_cpu_ms_per_churn"] == pytest.approx((4.0 - 2.0) / 100 * 1000)    # 0.2 CPU s/s over 10 s
    assert f["churn_e2e_p99_ratio"] == pytest.approx(2.0) and f["churn_connect_p50_ms"] == 1.0


def test_no_baseline_without_a_churn_free_step_at_the_same_rate() -> None:
    rows = [row(0, 10, 2.0, 4.0, 0, 10), row(1, 20, 3.0, 4.0, 10, 20)]
    assert baseline(rows, 1, {1}) is None
    f = step_figures(rows, 0, {1: 5.0}, ChurnStats((15_000_000,), (1,), (2,), (), ()), tasks=1)[1]
    assert f["churned"] == 1 and f["churn_baseline_step"] is None and f["broker_cpu_ms_per_churn"] is None
