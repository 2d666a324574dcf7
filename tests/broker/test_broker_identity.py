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
    - 4.0 on 5680 with the defaults (3.10's 15672/15692): both guesses left out, one warning each naming both
      brokers, sampling off (amqp-only sampling cannot be asked for);
    - 4.0 with its own endpoints named: unchanged; with 3.10's named explicitly: refused, both named;
    - 4.0, prometheus only, named right: unchanged."""
    from rbench.config.load import workload_from_dict
    from rbench.coordinator.broker_identity import check_sampled_brokers
    from tests.runhelpers import workload_dict

    three, four = BROKERS
    three.require()
    four.require()
    w3 = workload_from_dict(workload_dict(three.amqp_url, "ident"))
    assert check_sampled_brokers(w3) is w3
    guessed = check_sampled_brokers(workload_from_dict(workload_dict(four.amqp_url, "ident")))
    assert guessed.broker_metrics.enabled is False
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("rbench: warning: cluster local: broker_metrics.") for line in err)
    assert "http://127.0.0.1:15672/api answers for cluster " in err[0] and "not sampling management" in err[0]
    assert "RabbitMQ 3.10" in err[0] and "RabbitMQ 4.0" in err[0] and "guest:guest" not in err[0]
    assert "http://127.0.0.1:15692/metrics answers for cluster " in err[1] and "not sampling prometheus" in err[1]
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
    assert half.broker_metrics.source == "prometheus" and half.broker_metrics.enabled
