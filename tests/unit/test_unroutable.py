"""Messages routed to no queue: the broker's counter as rbench reads it, and what the verdict says; no broker.

The counters themselves are checked against both real brokers in tests/spark/test_unroutable_run.py; here is
the arithmetic on rows of the broker Parquet's shape (rbench.samples.broker) and the words built on it.
"""
from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from rbench.coordinator.broker import parse_prometheus, prometheus_figures
from rbench.reduce import verdict
from rbench.reduce.broker import BrokerSeries, add_cluster_figures, add_step_figures, counter_increase
from rbench.reduce.unroutable import cluster_line, dropped_of_lost, notes, print_cluster
from rbench.samples import broker as bs

S = 1_000_000_000


def _table(points: list[tuple[int, str, float]], metric: str = bs.UNROUTABLE_DROPPED, source: str = "prometheus") -> pa.Table:
    """Broker rows: (second, node, value) of one counter."""
    return pa.Table.from_pylist([{"run_id": "r", "cluster": "c", "t_ns": t * S, "source": source, "node": node,
                                  "queue": None, "metric": metric, "value": v} for t, node, v in points], bs.BROKER_SCHEMA)


def test_counter_increase_counts_a_restart_from_zero() -> None:
    assert counter_increase(np.array([100.0, 105.0, 105.0, 112.0])) == 12
    assert counter_increase(np.array([10.0, 20.0, 3.0, 8.0])) == 10 + 3 + 5     # fell to 3: restarted, 3 new
    assert counter_increase(np.array([7.0])) == 0


def test_counter_rise_sums_nodes_and_brackets_a_window() -> None:
    # two nodes sampled each second from 0 to 10 s; node a drops 10 a second from 3 s, node b 1 a second throughout;
    # node b misses its sample at 5 s (a gap is no loss for a counter)
    points = [(t, "a", 1000.0 + 10 * max(0, t - 3)) for t in range(11)]
    points += [(t, "b", 50.0 + t) for t in range(11) if t != 5]
    s = BrokerSeries("r", "c", 0, _table(points))
    assert s.counter_rise(bs.UNROUTABLE_DROPPED) == 70 + 10           # first to last sample of the stage
    # window [4 s, 6 s): from the samples at 4 s to those at 6 s (node b: from 4 s to 6 s, across its gap)
    assert s.counter_rise(bs.UNROUTABLE_DROPPED, 4 * S, 6 * S) == 20 + 2
    # a window between samples takes in the samples around it: an upper bound
    assert s.counter_rise(bs.UNROUTABLE_DROPPED, 4 * S + S // 2, 5 * S + S // 2) == 20 + 2
    assert s.counter_rise(bs.UNROUTABLE_DROPPED, 9 * S, 11 * S) is None   # no sample at or after its end
    assert s.counter_rise(bs.UNROUTABLE_RETURNED) is None                 # never sampled: not 0


def test_only_prometheus_counts() -> None:
    """proc/management rows of the same name are not the broker's unroutable counter (docs/broker.md)."""
    s = BrokerSeries("r", "c", 0, _table([(0, "x", 0.0), (5, "x", 9.0)], source="management"))
    assert s.counter_rise(bs.UNROUTABLE_DROPPED) is None


def test_prometheus_protocol_series_are_summed_and_queues_kept() -> None:
    text = ('rabbitmq_global_messages_unroutable_dropped_total{protocol="amqp091"} 7652\n'
            'rabbitmq_global_messages_unroutable_dropped_total{protocol="amqp10"} 3\n'
            'rabbitmq_global_messages_unroutable_dropped_total{protocol="stream"} 0\n'
            'rabbitmq_global_messages_unroutable_returned_total{protocol="amqp091"} 2\n'
            'rabbitmq_queue_messages_ready{queue="q1",vhost="/"} 4\n'
            'rabbitmq_queue_messages_ready{queue="other",vhost="/"} 9\n'
            'rabbitmq_process_resident_memory_bytes 1e6\n')
    assert prometheus_figures(parse_prometheus(text), ["q1"]) == {
        (bs.UNROUTABLE_DROPPED, None): 7655.0, (bs.UNROUTABLE_RETURNED, None): 2.0, ("messages_ready", "q1"): 4.0,
        ("resident_memory_bytes", None): 1e6}


def _step(**kw: Any) -> dict[str, Any]:
    row = {"run_id": "r", "cluster": "c", "step": 0, "target_rate": 100.0, "consume_rate": 0.0, "e2e_p99_ms": None,
           "matched": False, "lost": 0, "broker_unroutable_dropped": 0, "meas_start_ns": 2 * S, "end_ns": 4 * S,
           "consumed_in_window": 0}
    return {**row, **kw}


def test_step_and_cluster_figures_from_the_series() -> None:
    s = BrokerSeries("r", "c", 0, _table([(t, "a", 100.0 * t) for t in range(6)]))
    steps = pa.Table.from_pylist([{k: v for k, v in _step().items() if k != "broker_unroutable_dropped"}])
    out = add_step_figures(steps, [s]).to_pylist()
    assert out[0]["broker_unroutable_dropped"] == 200                         # 2 s → 4 s at 100 a second
    unsampled = add_step_figures(steps, []).to_pylist()
    assert unsampled[0]["broker_unroutable_dropped"] is None
    clusters = add_cluster_figures([{"run_id": "r", "cluster": "c"}, {"run_id": "r", "cluster": "other"}], [s])
    assert [(c["unroutable_dropped"], c["unroutable_returned"]) for c in clusters] == [(500, None), (None, None)]


def test_dropped_of_lost_is_at_most_either_figure() -> None:
    assert dropped_of_lost(_step(lost=299, broker_unroutable_dropped=300)) == 299
    assert dropped_of_lost(_step(lost=299, broker_unroutable_dropped=12)) == 12
    assert dropped_of_lost(_step(lost=0, broker_unroutable_dropped=300)) == 0
    assert dropped_of_lost(_step(lost=5, broker_unroutable_dropped=None)) == 0


def test_summary_line_reconciles_lost_with_unroutable() -> None:
    line = cluster_line("c", [{"unroutable_dropped": 7652}], 7000)
    assert line is not None and line.startswith("c: unroutable 7,652: accepted by the broker")
    assert "rabbitmq_global_messages_unroutable_dropped_total over the run" in line
    assert "of the 7,000 lost, up to 7,000 dropped as unroutable" in line and "bindings" in line
    assert cluster_line("c", [{"unroutable_dropped": 0}], 0) is None                    # a normal run: nothing
    others = cluster_line("c", [{"unroutable_dropped": 5}], 0)
    assert others is not None and "no measured message was lost" in others and "bindings" not in others
    zero = cluster_line("c", [{"unroutable_dropped": 0}], 12)
    assert zero is not None and "none of the 12 lost was dropped as unroutable" in zero
    unknown = cluster_line("c", [{"unroutable_dropped": None}], 12)
    assert unknown is not None and "not measured" in unknown
    out = io.StringIO()
    reduced = SimpleNamespace(clusters=[{"run_id": "r", "cluster": "c", "unroutable_dropped": 300}],
                              steps=[_step(lost=299, broker_unroutable_dropped=300)])
    print_cluster("c", reduced, out)
    print_cluster("c", None, out)                                                      # --no-reduce: nothing
    assert out.getvalue().count("\n") == 1 and "up to 299 dropped as unroutable" in out.getvalue()
    (note,) = notes(reduced.clusters, reduced.steps)
    assert note.startswith("r: c: unroutable 300")


def test_verdict_says_check_the_bindings_not_lower_rates() -> None:
    dropped = [_step(lost=299, broker_unroutable_dropped=300)]
    (v,) = verdict.verdicts(dropped, [], 0.02, 1000.0)
    assert v["status"] == verdict.UNROUTABLE and v["unroutable_dropped"] == 299
    assert "try lower rates" not in v["verdict"] and "check the exchange, routing key and bindings" in v["verdict"]
    assert "up to 299 dropped by the broker as unroutable" in v["failed_why"]
    # the same step without the broker's drops: a capacity failure, as before
    (plain,) = verdict.verdicts([_step(lost=299)], [], 0.02, 1000.0)
    assert plain["status"] == verdict.NONE_MET and "try lower rates" in plain["verdict"]
    # met at 50, unroutable at 100: no bracket, the figure at 50 a lower bound
    met = _step(step=0, target_rate=50.0, consume_rate=50.0, e2e_p99_ms=3.0, matched=True)
    (v2,) = verdict.verdicts([met, _step(step=1, lost=299, broker_unroutable_dropped=300)], [], 0.02, 1000.0)
    assert v2["status"] == verdict.UNROUTABLE and v2["cost_is_upper_bound"]
    assert v2["verdict"].startswith("Met the SLO up to 50 msg/s; not a capacity figure above it")


@pytest.mark.parametrize("other", [None, 0])
def test_a_step_without_a_broker_figure_keeps_its_verdict(other: Any) -> None:
    (v,) = verdict.verdicts([_step(lost=10, broker_unroutable_dropped=other)], [], 0.02, 1000.0)
    assert v["status"] == verdict.NONE_MET
