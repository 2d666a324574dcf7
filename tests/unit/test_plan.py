"""The planner's split is deterministic and keeps each queue's clients in one task."""
from __future__ import annotations

import pytest

from rbench.config.load import workload_from_dict
from rbench.config.types import Topology
from rbench.errors import ConfigError
from rbench.perftest import grammar, mapping
from rbench.plan import default_task_count, plan

CLUSTER = [{"name": "a", "uris": ["amqp://guest:guest@127.0.0.1:5672/"]}]


def workload(**kw: object):
    return workload_from_dict({"name": "t", "clusters": CLUSTER, "duration": 10, **kw})


def test_colocated_split_keeps_queue_clients_together() -> None:
    w = workload(producers=200, consumers=200, queues={"pattern": "perf-test-%d", "from": 1, "to": 100})
    plans = plan(w, "a", 8, "r", "/tmp/x")
    assert len(plans) == 8
    assert sum(len(p.publishers) for p in plans) == 200 and sum(len(p.consumers) for p in plans) == 200
    for p in plans:
        declared = {d.name for d in p.topology.queues}
        assert {s.queue for s in p.publishers} <= declared
        assert {s.queue for s in p.consumers} <= declared
    all_ids = sorted(s.producer_id for p in plans for s in p.publishers)
    assert all_ids == list(range(200))
    assert plan(w, "a", 8, "r", "/tmp/x") == plans      # deterministic


def test_producers_spread_round_robin_over_queues() -> None:
    w = workload(producers=4, consumers=2, queues={"pattern": "q-%d", "from": 1, "to": 2})
    (only,) = plan(w, "a", 1, "r", "/tmp/x")
    assert [s.queue for s in only.publishers] == ["q-1", "q-2", "q-1", "q-2"]
    assert [s.queue for s in only.consumers] == ["q-1", "q-2"]
    assert only.topology.bindings == (("q-1", "q-1"), ("q-2", "q-2"))


def test_more_tasks_than_queues_is_refused_when_colocated() -> None:
    w = workload(producers=4, queues={"name": "one"})
    with pytest.raises(ConfigError, match="tasks: 2 tasks but only 1 queue"):
        plan(w, "a", 2, "r", "/tmp/x")
    spread = workload(producers=4, consumers=4, queues={"name": "one"}, colocate=False)
    plans = plan(spread, "a", 2, "r", "/tmp/x")
    assert [len(p.publishers) for p in plans] == [2, 2]
    assert [len(p.topology.queues) for p in plans] == [1, 0]


def test_default_task_count_is_bounded_by_queues_and_slots() -> None:
    assert default_task_count(workload(queues={"pattern": "q-%d", "to": 10}), slots=2) == 2
    assert default_task_count(workload(queues={"name": "q"}), slots=8) == 1
    assert default_task_count(workload(tasks=3, queues={"pattern": "q-%d", "to": 10}), slots=2) == 3


def test_the_exchange_is_durable_as_perftest_declares_it_unless_the_workload_says_otherwise() -> None:
    (default,) = plan(workload(), "a", 1, "r", "/tmp/x")
    assert default.topology.exchange == "direct" and default.topology.exchange_durable
    (transient,) = plan(workload(exchange={"durable": False}), "a", 1, "r", "/tmp/x")
    assert not transient.topology.exchange_durable


def test_stream_queues_use_no_exchange_and_stream_driver() -> None:
    w = workload(queues={"name": "s", "type": "stream"})
    (p,) = plan(w, "a", 1, "r", "/tmp/x")
    assert p.driver == "stream" and p.topology.exchange == "" and p.topology.bindings == ()
    assert p.topology.queues[0].is_stream


def test_step_windows_follow_rate_steps() -> None:
    w = workload(rate_steps=[{"rate": 10, "duration": 5}, {"rate": 20, "duration": 7}])
    (p,) = plan(w, "a", 1, "r", "/tmp/x")
    assert [(s.offset_s, s.duration_s, s.rate) for s in p.steps] == [(0, 5, 10), (5, 7, 20)]
    assert p.end_offset_s == 12


def test_predeclared_queues_are_bound_but_not_declared() -> None:
    """issue 27: PerfTest -p skips the declare, not the binding; without it every message was unroutable."""
    w = workload(queues={"pattern": "q-%d", "from": 1, "to": 2, "predeclared": True})
    (p,) = plan(w, "a", 1, "r", "/tmp/x")
    assert p.topology.queues == ()
    assert p.topology.exchange == "direct" and p.topology.bindings == (("q-1", "q-1"), ("q-2", "q-2"))
    keyed = workload(queues={"name": "q", "predeclared": True}, routing_key="k")
    assert plan(keyed, "a", 1, "r", "/tmp/x")[0].topology.bindings == (("q", "k"),)
    split = plan(workload(queues={"pattern": "q-%d", "from": 1, "to": 2, "predeclared": True}), "a", 2, "r", "/tmp/x")
    assert [p.topology.bindings for p in split] == [(("q-1", "q-1"),), (("q-2", "q-2"),)]


def test_predeclared_queues_stay_unbound_with_bind_false_or_the_default_exchange() -> None:
    unbound = workload(queues={"name": "q", "predeclared": True, "bind": False})
    default_exchange = workload(queues={"name": "q", "predeclared": True}, exchange={"name": ""})
    for w in (unbound, default_exchange):
        (p,) = plan(w, "a", 1, "r", "/tmp/x")
        assert p.topology.queues == () and p.topology.bindings == ()


def test_perftest_predeclared_binds_unless_skip_binding_queues() -> None:
    def topology(*flags: str) -> Topology:
        mapped = mapping.to_workload(grammar.parse(["-u", "q", "-p", "-z", "1", *flags])).workload
        return plan(workload_from_dict(mapped), "default", 1, "r", "/tmp/x")[0].topology

    assert topology().queues == () and topology().bindings == (("q", "q"),)
    assert topology("-sb").bindings == ()
