"""Workload fields of the backlog scenario: consumer.pause, consumers_per_queue, fan-out routes."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rbench.config.load import load_workload, workload_from_dict
from rbench.errors import ConfigError
from rbench.plan import expected_queues, plan

ROOT = Path(__file__).resolve().parents[2]
URI = "amqp://guest:guest@127.0.0.1:5672/"


def _w(**fields: Any) -> Any:
    base: dict[str, Any] = {"name": "t", "clusters": [{"name": "c", "uris": [URI]}], "duration": 5,
                            "queues": {"pattern": "q-%d", "from": 1, "to": 3}}
    return workload_from_dict({**base, **fields})


@pytest.mark.parametrize("bad", [{"until_backlog": 5, "for": "3s"}, {}])
def test_pause_needs_exactly_one_trigger(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="consumer.pause: .*exactly one of until_backlog or for"):
        _w(consumer={"pause": {"at": 1, **bad}})


def test_pause_refuses_auto_delete_queues_and_other_drivers() -> None:
    with pytest.raises(ConfigError, match="consumer.pause: .*auto_delete: false"):
        _w(queues={"pattern": "q-%d", "to": 3, "auto_delete": True}, consumer={"pause": {"at": 1, "for": 1}})
    with pytest.raises(ConfigError, match="consumer.pause: honoured by the amqp091 driver only"):
        _w(driver="aiopika", consumer={"pause": {"at": 1, "for": 1}})


def test_consumers_per_queue() -> None:
    assert _w(consumers_per_queue=20).consumers == 60
    assert _w(consumers_per_queue=2, consumers=6).consumers == 6
    with pytest.raises(ConfigError, match="consumers: 5 conflicts with consumers_per_queue"):
        _w(consumers_per_queue=2, consumers=5)
    # consumer j on queue j mod 3: two on each queue
    specs = [c for t in plan(_w(consumers_per_queue=2, tasks=1), "c", 1, "r", "/tmp") for c in t.consumers]
    assert sorted(c.queue for c in specs) == ["q-1", "q-1", "q-2", "q-2", "q-3", "q-3"]


def test_expected_queues_follow_the_exchange() -> None:
    assert expected_queues(_w(producers=2, exchange={"name": "f", "type": "fanout"})) == {0: ["q-1", "q-2", "q-3"],
                                                                                         1: ["q-1", "q-2", "q-3"]}
    assert expected_queues(_w(producers=2)) == {0: ["q-1"], 1: ["q-2"]}                       # direct, key = queue
    assert expected_queues(_w(producers=1, routing_key="k")) == {0: ["q-1", "q-2", "q-3"]}    # one key binds all
    assert expected_queues(_w(producers=1, exchange={"name": "t", "type": "topic"}, routing_key="a.b")) == {
        0: ["q-1", "q-2", "q-3"]}
    assert expected_queues(_w(exchange={"name": ""})) == {0: ["q-1"]}
    assert expected_queues(_w(exchange={"name": "h", "type": "headers"})) is None
    assert expected_queues(_w(publisher={"random_routing_key": True})) is None


def test_shipped_backlog_workloads_validate() -> None:
    full = load_workload(ROOT / "conf" / "workloads" / "backlog-drain.yaml")
    assert full.consumers == 60 and full.consumer.prefetch == 1 and full.rate == 600 and full.size == 200
    assert full.consumer.pause is not None and full.consumer.pause.until_backlog == 500_000
    assert round(20 / full.consumer.processing_delay) == 1200              # per queue
    small = load_workload(ROOT / "conf" / "workloads" / "backlog-drain-small.yaml")
    assert small.duration is not None and small.duration < 60
    # the 4.0 twin: the same scenario, only the broker and where it is sampled differ
    four = load_workload(ROOT / "conf" / "workloads" / "backlog-drain-small-4.yaml")
    (cluster,) = four.clusters
    assert cluster.uris == ["amqp://guest:guest@127.0.0.1:5680/"] and cluster.broker_metrics is not None
    assert cluster.broker_metrics.management_urls == ["http://127.0.0.1:15680/api"]
    assert cluster.broker_metrics.prometheus_urls == ["http://127.0.0.1:15780/metrics"]
    assert cluster.broker_metrics.interval == small.broker_metrics.interval
    skip = {"name", "description", "clusters"}
    assert four.model_dump(exclude=skip) == small.model_dump(exclude=skip)


def test_consumer_processing_time_is_refused_where_a_driver_would_ignore_it() -> None:
    """The stream driver does not simulate processing time: a workload asking for it is refused, not run
    as if the consumers were fast. amqp10 simulates processing_delay and rate (settling when done)."""
    with pytest.raises(ConfigError, match="consumer.processing_delay: honoured by the amqp091 and aiopika and "
                                          "amqp10 drivers only \\(this workload uses stream\\)"):
        _w(driver="stream", consumer={"processing_delay": 0.001})
    with pytest.raises(ConfigError, match="consumer.rate: honoured by the amqp091 and amqp10 drivers only"):
        _w(driver="aiopika", consumer={"rate": 100})
    _w(driver="amqp10", consumer={"processing_delay": 0.001, "rate": 100})
