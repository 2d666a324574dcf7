"""run.json's clusters[].broker (rbench.samples.broker_facts): round trip, unknown keys kept, older files read."""
from __future__ import annotations

import json
from typing import Any

import pytest

from rbench.errors import SinkError
from rbench.samples.broker_facts import BrokerFacts, DeprecatedFeature, FeatureFlag, NodeFds
from rbench.samples.record import ClusterRecord, RunRecord

FOUR = BrokerFacts(product="RabbitMQ", version="4.0.5", erlang="27.3.4.1", cluster_name="rabbit4@vm",
                   nodes=("rabbit4@localhost",),
                   feature_flags=(FeatureFlag("khepri_db", "disabled"), FeatureFlag("quorum_queue", "enabled")),
                   deprecated_features=(DeprecatedFeature("transient_nonexcl_queues", "permitted_by_default"),),
                   source="management API http://127.0.0.1:15680/api",
                   node_fds=(NodeFds("rabbit4@localhost", fd_total=20000, fd_used=47, sockets_total=0, sockets_used=0),))


def test_facts_round_trip_through_run_json_and_keep_what_a_later_rbench_adds() -> None:
    doc: dict[str, Any] = {"clusters": [{"name": "a", "broker": {**FOUR.to_json(), "later": {"x": 1}}}]}
    rec = RunRecord.from_json(json.loads(json.dumps(doc)))
    facts = rec.clusters[0].broker
    assert facts is not None and facts.extra == {"later": {"x": 1}}
    assert facts == BrokerFacts(**{**FOUR.__dict__, "extra": {"later": {"x": 1}}})
    assert rec.to_json()["clusters"][0]["broker"] == doc["clusters"][0]["broker"]
    assert RunRecord.from_json(rec.to_json()) == rec
    assert rec.broker_version(rec.clusters[0]) == "4.0.5"


def test_what_is_derived_and_shown() -> None:
    assert FOUR.metadata_store == "mnesia" and FOUR.enabled_flags() == ("quorum_queue",)
    assert FOUR.line() == "RabbitMQ 4.0.5 (Erlang 27.3.4.1), cluster rabbit4@vm, node rabbit4@localhost, khepri_db off"
    khepri = BrokerFacts(version="4.2.0", feature_flags=(FeatureFlag("khepri_db", "enabled"),))
    assert khepri.metadata_store == "khepri" and khepri.line().endswith("khepri_db on")
    three = BrokerFacts(product="RabbitMQ", version="3.10.8", feature_flags=(FeatureFlag("quorum_queue", "enabled"),))
    assert three.metadata_store == "mnesia" and three.line().endswith("Mnesia (no khepri_db flag)")
    unread = BrokerFacts(version="4.0.5")
    assert unread.metadata_store is None and "feature flags not read" in unread.line()
    assert BrokerFacts(version="4.1.0-rc.1").version_tuple() == (4, 1, 0) and BrokerFacts().version_tuple() == ()
    assert FOUR.short() == "RabbitMQ 4.0.5" and FOUR.deprecation_phase("transient_nonexcl_queues") == "permitted_by_default"


def test_an_older_run_json_has_no_broker_and_a_cluster_without_one_writes_null() -> None:
    rec = RunRecord.from_json({"clusters": [{"name": "a"}]})
    assert rec.clusters[0].broker is None and rec.broker_version(rec.clusters[0]) is None
    assert ClusterRecord("a").to_json()["broker"] is None
    unread = RunRecord.from_json({"clusters": [{"name": "a", "broker": {"version": "4.0.5", "feature_flags": None}}]})
    assert unread.clusters[0].broker == BrokerFacts(version="4.0.5")


@pytest.mark.parametrize("bad, where", [
    ({"broker": "4.0.5"}, r"clusters\[0\]\.broker: expected an object"),
    ({"broker": {"feature_flags": [{"name": "x"}]}}, r"clusters\[0\]\.broker\.feature_flags\[0\]\.state: expected string"),
    ({"broker": {"max_message_size": "16M"}}, r"clusters\[0\]\.broker\.max_message_size: expected int or null"),
])
def test_a_malformed_broker_field_is_one_line_naming_it(bad: dict[str, Any], where: str) -> None:
    with pytest.raises(SinkError, match=where):
        RunRecord.from_json({"clusters": [{"name": "a", **bad}]})
