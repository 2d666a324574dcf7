"""The coordinator's merged /metrics: buckets cumulative and exact, counters summed, exposition valid."""
from __future__ import annotations

import numpy as np
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rbench.live import histogram
from rbench.live.control import ProgressBoard
from rbench.live.control.wire import MetricsEndpoint, Progress
from rbench.live.run_metrics import BOUNDS_S, BUCKET_RATIO, EDGE_INDEX, RunMetrics, start


def _families(m: RunMetrics) -> dict[str, list]:
    text = generate_latest(m.registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_bounds_are_every_second_control_edge_ten_per_decade() -> None:
    assert BOUNDS_S[0] == 1e-5 and BOUNDS_S[-1] == 100.0 and len(BOUNDS_S) == 71
    ratios = np.diff(np.log10(BOUNDS_S))
    assert np.allclose(ratios, 0.1, atol=1e-5)
    assert np.allclose(np.asarray(BOUNDS_S) * 1e9, histogram.EDGES_NS[EDGE_INDEX], rtol=1e-5)
    assert abs(BUCKET_RATIO - 10 ** 0.1) < 1e-12


def test_merged_buckets_equal_a_histogram_of_all_tasks_latencies() -> None:
    rng = np.random.default_rng(3)
    board = ProgressBoard()
    m = start(board, "r1", None, "amqp091", port=None)
    every = []
    for task in range(3):
        for second in range(4):
            lat = rng.lognormal(np.log(2e6), 1.0, 500).astype(np.int64)        # ~2 ms, wide
            every.append(lat)
            board.add(Progress("a", task, step=1, second=second, published=500, confirmed=499, consumed=500, nacked=1,
                               returned=0, hist=histogram.bucket_counts(lat), e2e_sum_ns=int(lat.sum()),
                               confirm_hist={}, confirm_sum_ns=0))
    board.add(MetricsEndpoint("a", 0, metrics_port=9999, host="h"))          # ignored by the collector
    all_ns = np.concatenate(every)
    fam = _families(m)
    buckets = [s for s in fam["rbench_run_latency_seconds"] if s.name.endswith("_bucket")]
    assert {s.labels["step"] for s in buckets} == {"1"}                    # the 0-based index, like every label
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and counts[-1] == all_ns.size           # cumulative, +Inf = all
    for s in buckets[:-1]:
        assert s.value == np.sum(all_ns < float(s.labels["le"]) * 1e9 * (1 + 1e-9))
    total = {s.name: s.value for s in fam["rbench_run_published"]}
    assert total["rbench_run_published_total"] == 6000
    assert {s.name: s.value for s in fam["rbench_run_nacked"]}["rbench_run_nacked_total"] == 12
    sums = [s.value for s in fam["rbench_run_latency_seconds"] if s.name.endswith("_sum")]
    assert abs(sums[0] - all_ns.sum() / 1e9) < 1e-6


def test_quantile_from_exported_buckets_is_within_one_bucket() -> None:
    """Prometheus' histogram_quantile rule (linear inside the bucket) on our buckets, against numpy."""
    rng = np.random.default_rng(5)
    lat = rng.lognormal(np.log(5e6), 0.6, 20_000).astype(np.int64)
    m = RunMetrics("r")
    m.add(Progress("c", 0, step=0, second=0, consumed=lat.size, hist=histogram.bucket_counts(lat),
                   e2e_sum_ns=int(lat.sum())))
    buckets = [(float(s.labels["le"]), s.value) for s in _families(m)["rbench_run_latency_seconds"] if s.name.endswith("_bucket")]
    for q in (0.5, 0.95, 0.99):
        rank = q * buckets[-1][1]
        i = next(i for i, (_, c) in enumerate(buckets) if c >= rank)
        lo, clo = (buckets[i - 1] if i else (0.0, 0.0))
        hi, chi = buckets[i]
        estimate = lo + (hi - lo) * (rank - clo) / (chi - clo)
        exact = np.percentile(lat, q * 100) / 1e9
        assert abs(np.log(estimate / exact)) <= np.log(BUCKET_RATIO)
        assert abs(estimate / exact - 1) < 0.05           # and in practice a few per cent


def test_rate_gauges_show_the_last_complete_second() -> None:
    import time

    m = RunMetrics("r")
    last = int(time.time() - 0.25) - 1
    m.add(Progress("c", 0, step=0, second=last, published=700, consumed=650))
    m.add(Progress("c", 1, step=0, second=last, published=300, consumed=350))
    m.add(Progress("c", 1, step=0, second=last - 1, published=5))
    fam = _families(m)
    (pub,) = fam["rbench_run_published_per_second"]
    assert pub.value in (1000, 0)           # 0 only if the wall clock turned a second between add and collect
    assert pub.labels == {"run_id": "r", "cluster": "c"}
