"""Who answered on each door: the AMQP, management and Prometheus endpoints of RabbitMQ 3.10 and 4.0.

Both brokers run on this machine (the system's 3.10 on 5672, `make broker-4`'s 4.0 on 5680), which is
exactly the set-up in which the sampler's default endpoints (the AMQP host at 15672/15692) used to
sample the wrong one.
"""
from __future__ import annotations

import asyncio
import base64

import aiormq
import pytest

from rbench.config.model import Workload
from rbench.coordinator.broker_identity import (
    BrokerIdentity,
    check_same_broker,
    from_management,
    from_prometheus,
    from_server_properties,
)
from rbench.errors import ConfigError
from tests.brokers import BROKERS, Broker

AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


def _amqp_identity(broker: Broker) -> BrokerIdentity:
    async def props() -> dict[str, object]:
        conn = await aiormq.connect(broker.amqp_url)
        try:
            return dict(conn.server_properties)
        finally:
            await conn.close()

    return from_server_properties(asyncio.run(props()))


@pytest.mark.parametrize("broker", BROKERS, ids=lambda b: b.name)
def test_every_door_names_the_same_cluster_and_version(broker: Broker) -> None:
    broker.require()
    amqp = _amqp_identity(broker)
    mgmt = from_management(broker.management_url, AUTH)
    prom = from_prometheus(broker.prometheus_url)
    assert amqp.version is not None and amqp.version.startswith(broker.version_prefix)
    assert mgmt.version == amqp.version and mgmt.cluster_name == amqp.cluster_name
    assert prom is not None and prom.cluster_name == amqp.cluster_name and prom.node == mgmt.node
    assert "quorum_queue" in mgmt.feature_flags           # enabled flags only, from /api/feature-flags
    check_same_broker(amqp, broker.amqp_url, mgmt, broker.management_url, "broker_metrics.management_urls")
    merged = amqp.merged(mgmt)
    assert merged.node == mgmt.node and merged.platform == amqp.platform
    assert BrokerIdentity.from_json(merged.to_json()) == merged


def test_the_other_brokers_management_api_is_refused_with_both_named() -> None:
    three, four = BROKERS
    three.require()
    four.require()
    amqp4 = _amqp_identity(four)
    mgmt3 = from_management(three.management_url, AUTH)            # what the default endpoint guess reached
    with pytest.raises(ConfigError) as caught:
        check_same_broker(amqp4, four.amqp_url, mgmt3, three.management_url, "broker_metrics.management_urls")
    text = str(caught.value)
    assert "\n" not in text and text.startswith("broker_metrics.management_urls: ")
    assert f"cluster {mgmt3.cluster_name} (RabbitMQ {mgmt3.version}" in text
    assert f"cluster {amqp4.cluster_name} (RabbitMQ {amqp4.version}" in text
    assert "guest:guest" not in text


def test_an_endpoint_that_does_not_say_is_no_mismatch() -> None:
    check_same_broker(BrokerIdentity("a"), "amqp://h", BrokerIdentity(None), "http://h/metrics", "x")


def test_before_a_run_the_sampler_reads_the_load_brokers_endpoints_or_none(capsys: pytest.CaptureFixture[str]) -> None:
    """The run sequence's check (rbench.coordinator.broker_identity.check_sampled_brokers), against both brokers:
    - 3.10 with the default endpoints: unchanged;
    - 4.0 on 5680 with the defaults: its own endpoints (rbench.coordinator.broker_endpoints), unchanged;
    - 4.0 with 3.10's ports (15672/15692) set: both guesses left out, one warning each naming both
      brokers and the perftest flag, sampling off (amqp-only sampling cannot be asked for);
    - 4.0 with its own endpoints named: unchanged; with 3.10's named explicitly: refused, both named;
    - 4.0, prometheus only, named right: unchanged."""
    from rbench.config.load import workload_from_dict
    from rbench.coordinator.broker_identity import check_sampled_brokers as check
    from rbench.coordinator.run import probe_clusters
    from tests.runhelpers import workload_dict

    def check_sampled_brokers(w: Workload) -> Workload:
        return check(w, probe_clusters(w))       # the run sequence's order: the probe says who answered

    three, four = BROKERS
    three.require()
    four.require()
    w3 = workload_from_dict(workload_dict(three.amqp_url, "ident"))
    assert check_sampled_brokers(w3) is w3
    found = workload_from_dict(workload_dict(four.amqp_url, "ident"))     # the defaults: 4.0 lists its own
    assert check_sampled_brokers(found) is found and not capsys.readouterr().err
    # ports set to 3.10's: a guess (not a named endpoint) that reaches the other broker
    guessed = check_sampled_brokers(workload_from_dict(workload_dict(four.amqp_url, "ident", broker_metrics={
        "management_port": three.management_port, "prometheus_port": three.prometheus_port})))
    assert guessed.broker_metrics.enabled is False
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("rbench: warning: cluster local: broker_metrics.") for line in err)
    assert "http://127.0.0.1:15672/api answers for cluster " in err[0] and "not sampling management" in err[0]
    assert "RabbitMQ 3.10" in err[0] and "RabbitMQ 4.0" in err[0] and "guest:guest" not in err[0]
    assert "http://127.0.0.1:15692/metrics answers for cluster " in err[1] and "not sampling prometheus" in err[1]
    assert "(rbench perftest: --management-uri)" in err[0] and "(rbench perftest: --prometheus-uri)" in err[1]
    own = {"management_urls": [four.management_url], "prometheus_urls": [four.prometheus_url]}
    w4 = workload_from_dict(workload_dict(four.amqp_url, "ident", broker_metrics=own))
    assert check_sampled_brokers(w4) is w4
    wrong = {"management_urls": [three.management_url]}
    with pytest.raises(ConfigError) as caught:
        check_sampled_brokers(workload_from_dict(workload_dict(four.amqp_url, "ident", broker_metrics=wrong)))
    text = str(caught.value)
    assert text.startswith("cluster local: broker_metrics.management_urls: http://127.0.0.1:15672/api answers for ")
    assert "RabbitMQ 3.10" in text and "RabbitMQ 4.0" in text and "\n" not in text
    prom = {"source": "prometheus", "prometheus_urls": [four.prometheus_url]}
    w5 = workload_from_dict(workload_dict(four.amqp_url, "ident", broker_metrics=prom))
    assert check_sampled_brokers(w5) is w5
    half = check_sampled_brokers(workload_from_dict(workload_dict(four.amqp_url, "ident", broker_metrics={
        "prometheus_urls": [four.prometheus_url]})))
    assert half.broker_metrics.source == "both" and half.broker_metrics.enabled     # management: 4.0's own, found
    half3 = check_sampled_brokers(workload_from_dict(workload_dict(four.amqp_url, "ident", broker_metrics={
        "prometheus_urls": [four.prometheus_url], "management_port": three.management_port})))
    assert half3.broker_metrics.source == "prometheus" and half3.broker_metrics.enabled


def test_a_cluster_with_its_own_endpoints_is_sampled_beside_another(capsys: pytest.CaptureFixture[str]) -> None:
    """One workload over 3.10 and 4.0 (`rbench compare`): 4.0's cluster names its own endpoints in its
    broker_metrics, so both clusters are sampled and nothing is dropped; a cluster's own settings that only
    guess (the default ports) are dropped from that cluster's copy, the workload's left as they were."""
    from rbench.config.load import workload_from_dict
    from rbench.coordinator.broker_identity import check_sampled_brokers as check
    from rbench.coordinator.run import probe_clusters
    from tests.runhelpers import workload_dict

    def check_sampled_brokers(w: Workload) -> Workload:
        return check(w, probe_clusters(w))       # the run sequence's order: the probe says who answered

    three, four = BROKERS
    three.require()
    four.require()
    own = {"management_urls": [four.management_url], "prometheus_urls": [four.prometheus_url]}
    clusters = [{"name": "r3", "uris": [three.amqp_url]}, {"name": "r4", "uris": [four.amqp_url], "broker_metrics": own}]
    w = workload_from_dict(workload_dict(three.amqp_url, "ident", clusters=clusters))
    assert check_sampled_brokers(w) is w and capsys.readouterr().err == ""
    assert w.broker_metrics_of(w.clusters[1]).management_urls == [four.management_url]
    assert w.broker_metrics_of(w.clusters[0]) is w.broker_metrics
    # ports set to 3.10's: a guess (no URL named) that answers for the other broker
    guessing = [clusters[0], {**clusters[1], "broker_metrics": {"interval": 2, "management_port": three.management_port,
                                                                "prometheus_port": three.prometheus_port}}]
    checked = check_sampled_brokers(workload_from_dict(workload_dict(three.amqp_url, "ident", clusters=guessing)))
    assert checked.broker_metrics.enabled and checked.clusters[0].broker_metrics is None
    assert checked.clusters[1].broker_metrics is not None and checked.clusters[1].broker_metrics.enabled is False
    assert checked.clusters[1].broker_metrics.interval == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("rbench: warning: cluster r4: broker_metrics.") for line in err)


def test_a_clusters_own_listener_vouches_for_its_nodes_when_names_differ() -> None:
    """An unnamed cluster's nodes each report their own cluster name (4.0: rabbit4-2@host from node 2): the
    management API's listeners (every node's AMQP port) say which endpoints are the load's cluster after all."""
    three, four = BROKERS
    three.require()
    four.require()
    mgmt4 = from_management(four.management_url, AUTH)
    mgmt3 = from_management(three.management_url, AUTH)
    assert ("rabbit4@localhost", "127.0.0.1", four.amqp_port) in mgmt4.amqp_listeners
    assert mgmt4.listener_of(four.amqp_url, four.management_url) == "rabbit4@localhost"
    assert mgmt3.listener_of(four.amqp_url, three.management_url) is None          # 3.10 listens on 5672 only
    assert BrokerIdentity.from_json(mgmt4.to_json()) == mgmt4
    # node 2 of an unnamed cluster, its management API listing node 1's listener (the load's): the same cluster
    node1 = BrokerIdentity("rabbit4-1@vm", "4.0.5")
    node2 = BrokerIdentity("rabbit4-2@vm", "4.0.5", node="rabbit4-2@localhost",
                           amqp_listeners=(("rabbit4-1@localhost", "127.0.0.1", 5721), ("rabbit4-2@localhost", "127.0.0.1", 5722)))
    check_same_broker(node1, "amqp://127.0.0.1:5721", node2, "http://127.0.0.1:15722/api", "x")
    prom2 = BrokerIdentity("rabbit4-2@vm", node="rabbit4-2@localhost")
    with pytest.raises(ConfigError):                  # Prometheus lists no listeners: its node must be vouched for
        check_same_broker(node1, "amqp://127.0.0.1:5721", prom2, "http://127.0.0.1:15822/metrics", "x")
    check_same_broker(node1, "amqp://127.0.0.1:5721", prom2, "http://127.0.0.1:15822/metrics", "x",
                      frozenset({"rabbit4-1@localhost", "rabbit4-2@localhost"}))
    # a listener on every address vouches only through an endpoint on the door's own host
    wild = BrokerIdentity("b@h2", amqp_listeners=(("b@h2", "::", 5672),))
    assert wild.listener_of("amqp://h1.example:5672", "http://h2.example:15672/api") is None
    assert wild.listener_of("amqp://h2.example:5672", "http://h2.example:15672/api") == "b@h2"
