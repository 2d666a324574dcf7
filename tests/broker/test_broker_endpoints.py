"""The sampler's endpoints asked of the broker that serves the load (rbench.coordinator.broker_endpoints).

Both brokers run on this machine, 3.10 on the standard ports and 4.0 on 5680, so the default guess
(the AMQP host at 15672/15692) is 3.10's: a run against 4.0 must find 4.0's own endpoints, and a run
against 3.10 must keep the guess, which is right there.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rbench.config.observe import BrokerMetrics
from rbench.coordinator.broker import find_beam
from rbench.coordinator.broker_endpoints import (
    asks_broker,
    authorization,
    find_endpoints,
    listening_pid,
    listening_ports,
    overview_listeners,
    sampled_endpoints,
    serving,
)
from tests.brokers import BROKERS, RABBITMQ_3, RABBITMQ_4, Broker


@pytest.mark.parametrize("broker", BROKERS, ids=lambda b: b.name)
def test_the_defaults_are_the_load_brokers_own_endpoints(broker: Broker) -> None:
    broker.require()
    assert sampled_endpoints([broker.amqp_url], BrokerMetrics()) == ([broker.management_url], [broker.prometheus_url])


@pytest.mark.parametrize("broker", BROKERS, ids=lambda b: b.name)
def test_the_broker_lists_its_endpoints_for_its_amqp_and_stream_ports(broker: Broker) -> None:
    broker.require()
    auth = authorization([broker.amqp_url])
    for port in (broker.amqp_port, broker.stream_port):
        found = find_endpoints("127.0.0.1", port, auth, "http", 15672)
        assert found is not None, port
        assert (found.management, found.prometheus) == (broker.management_url, broker.prometheus_url)
        assert found.node.startswith("rabbit4@" if broker is RABBITMQ_4 else "rabbit@")


def test_another_brokers_management_api_never_qualifies() -> None:
    """3.10's management API does not list 4.0's port: it is no answer for a load on 5680, whatever else it says."""
    RABBITMQ_3.require()
    base = RABBITMQ_3.management_url
    listeners = overview_listeners(base, authorization([RABBITMQ_3.amqp_url]))
    assert serving(listeners, "127.0.0.1", RABBITMQ_4.amqp_port, base) is None
    assert serving(listeners, "127.0.0.1", RABBITMQ_3.amqp_port, base) is not None


def test_what_the_workload_sets_is_not_overridden() -> None:
    RABBITMQ_4.require()
    four = RABBITMQ_4
    named = BrokerMetrics(management_urls=[four.management_url])
    # a named management API, Prometheus left open: its port comes from that API's listeners
    assert sampled_endpoints([four.amqp_url], named) == ([four.management_url], [four.prometheus_url])
    ports = BrokerMetrics(management_port=15672, prometheus_port=15692)
    assert not asks_broker([four.amqp_port], ports)
    assert sampled_endpoints([four.amqp_url], ports) == (["http://127.0.0.1:15672/api"], ["http://127.0.0.1:15692/metrics"])
    half = BrokerMetrics(prometheus_port=15692)
    assert sampled_endpoints([four.amqp_url], half) == ([four.management_url], ["http://127.0.0.1:15692/metrics"])
    assert not asks_broker([5672], BrokerMetrics())


def test_the_beam_of_the_broker_serving_the_port() -> None:
    """Two brokers, two beam.smp processes: the one listening on the load's port is the one measured."""
    pids = {}
    for broker in BROKERS:
        broker.require()
        pid = listening_pid(broker.amqp_port)
        assert pid is not None and broker.management_port in listening_ports(pid)
        assert find_beam(None, broker.amqp_port) == pid
        pids[broker.name] = pid
    assert len(set(pids.values())) == 2


@pytest.mark.parametrize("broker", BROKERS, ids=lambda b: b.name)
def test_perftest_samples_the_broker_it_loads(broker: Broker, tmp_path: Path) -> None:
    """`rbench perftest -h` on each broker, 4.0 with the flags, 3.10 without: the broker Parquet's nodes and
    the measured beam are that broker's, and run.json's facts come from its management API."""
    from rbench.cli import main

    broker.require()
    flags = ["--management-uri", f"http://127.0.0.1:{broker.management_port}",
             "--prometheus-uri", f"http://127.0.0.1:{broker.prometheus_port}"] if broker is RABBITMQ_4 else []
    assert main(["perftest", "-h", broker.amqp_url, *flags, "-z", "2", "-f", "persistent", "-u", f"endpoints-{broker.name}",
                 "--master", "local[2]", "--out", str(tmp_path), "--quiet", "--no-reduce"]) == 0
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    cluster = json.loads((run_dir / "run.json").read_text())["clusters"][0]
    node = "rabbit4@localhost" if broker is RABBITMQ_4 else "rabbit@localhost"
    assert cluster["broker"]["nodes"] == [node] and cluster["broker"]["feature_flags"]
    assert set(cluster["broker_metrics"]["sources"]) == {"management", "prometheus", "amqp"}
    assert cluster["broker_metrics"]["proc_pid"] == listening_pid(broker.amqp_port)
    rows = pq.read_table(run_dir / "broker").to_pylist()
    for source in ("management", "prometheus"):
        assert {r["node"] for r in rows if r["source"] == source and r["node"]} == {node}, source
