"""The endpoint rules of rbench.coordinator.broker_endpoints that need no broker: which listener list answers for
a load's port, and when the broker is asked at all."""
from __future__ import annotations

from rbench.config.observe import BrokerMetrics
from rbench.coordinator.broker_endpoints import Listener, asks_broker, serving

THREE_NODES = [Listener(f"rabbit-{i}@h", proto, port + i) for i in (1, 2, 3)
               for proto, port in (("amqp", 5720), ("http", 15720), ("http/prometheus", 15820), ("stream", 5570))]


def test_the_node_serving_the_port_gives_its_own_prometheus_listener() -> None:
    found = serving(THREE_NODES, "127.0.0.1", 5722, "http://127.0.0.1:15721/api/")
    assert found is not None and found.node == "rabbit-2@h"
    assert (found.management, found.prometheus) == ("http://127.0.0.1:15721/api", "http://127.0.0.1:15822/metrics")
    by_stream = serving(THREE_NODES, "::1", 5573, "http://[::1]:15721/api")
    assert by_stream is not None and by_stream.prometheus == "http://[::1]:15823/metrics"


def test_a_list_without_the_port_or_with_it_on_another_protocol_is_no_answer() -> None:
    assert serving(THREE_NODES, "h", 5680, "http://h:15672/api") is None
    assert serving(THREE_NODES, "h", 15721, "http://h:15721/api") is None      # http, not a load protocol


def test_tls_prometheus_and_a_node_without_one() -> None:
    tls = [Listener("n@h", "amqp/ssl", 5671), Listener("n@h", "https/prometheus", 15691)]
    found = serving(tls, "h", 5671, "https://h:15671/api")
    assert found is not None and found.prometheus == "https://h:15691/metrics"
    bare = serving([Listener("n@h", "amqp", 5680)], "h", 5680, "http://h:15680/api")
    assert bare is not None and bare.prometheus is None


def test_the_broker_is_asked_only_off_the_standard_ports_and_for_what_is_not_set() -> None:
    assert not asks_broker([5672], BrokerMetrics())
    assert not asks_broker([5552, 5671], BrokerMetrics())
    assert asks_broker([5680], BrokerMetrics())
    assert asks_broker([5672, 5722], BrokerMetrics())
    assert not asks_broker([5680], BrokerMetrics(management_port=15680, prometheus_port=15780))
    assert asks_broker([5680], BrokerMetrics(management_port=15680))           # Prometheus is still open
    assert not asks_broker([5680], BrokerMetrics(management_urls=["http://h:1/api"], prometheus_urls=["http://h:2/metrics"]))
