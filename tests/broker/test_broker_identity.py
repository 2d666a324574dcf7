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
