"""The rule table of rbench.coordinator.broker_limits, on BrokerFacts as RabbitMQ 3.10.8 and 4.0.5 state them.

The facts below are what the two brokers of tests/brokers.py answer (tests/broker/test_broker_facts.py reads
them for real); here each rule is tried at its edges without a network."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.coordinator.broker_limits import (
    ERROR,
    RULES,
    WARNING,
    check_broker_limits,
    findings,
    max_message_size,
)
from rbench.errors import ConfigError
from rbench.samples.broker_facts import BrokerFacts, DeprecatedFeature, FeatureFlag

MIB = 1024 * 1024
V3 = BrokerFacts(product="RabbitMQ", version="3.10.8", erlang="25.2.3", cluster_name="rabbit@vm",
                 nodes=("rabbit@localhost",), feature_flags=(FeatureFlag("quorum_queue", "enabled"),),
                 source="management API http://127.0.0.1:15672/api")
V4 = BrokerFacts(product="RabbitMQ", version="4.0.5", erlang="27.3.4.1", cluster_name="rabbit4@vm",
                 nodes=("rabbit4@localhost",), feature_flags=(FeatureFlag("khepri_db", "disabled"),),
                 deprecated_features=(DeprecatedFeature("transient_nonexcl_queues", "permitted_by_default"),
                                      DeprecatedFeature("classic_queue_mirroring", "removed")),
                 source="management API http://127.0.0.1:15680/api")
V4_PROBE_ONLY = BrokerFacts(product="RabbitMQ", version="4.0.5", cluster_name="rabbit4@vm", source="probe")


def workload(**overrides: Any) -> Any:
    data: dict[str, Any] = {"name": "limits", "clusters": [{"name": "c", "uris": ["amqp://guest:guest@h:5680/"]}],
                            "rate": 10, "duration": 1, "queues": {"name": "q1"}}
    data.update(overrides)
    return workload_from_dict(data)


def found(w: Any, facts: BrokerFacts) -> list[tuple[str, str]]:
    return [(f.level, f.field) for _, f in findings(w, {"c": facts})]


def test_the_table_has_one_rule_per_limit() -> None:
    assert [r.__name__ for r in RULES] == ["message_size_rule", "in_memory_rule", "transient_queue_rule",
                                           "mirroring_rule", "stream_single_active_rule", "stream_filter_rule"]


def test_stream_filtering_is_refused_before_3_13_naming_the_field_and_the_version() -> None:
    stream = {"name": "s", "type": "stream"}
    both = workload(queues=stream, publisher={"filter": {"values": ["eu", "us"]}}, consumer={"filter": ["eu"]})
    assert found(both, V3) == [(ERROR, "publisher.filter"), (ERROR, "consumer.filter")]
    out = io.StringIO()
    with pytest.raises(ConfigError) as caught:
        check_broker_limits(both, {"c": V3}, out)
    assert str(caught.value) == ("cluster c: publisher.filter: stream filtering needs RabbitMQ 3.13 or later; "
                                 "RabbitMQ 3.10.8 does not have it")
    assert found(workload(queues=stream, consumer={"filter": ["eu"]}), V3) == [(ERROR, "consumer.filter")]
    assert found(both, V4) == [] and found(both, BrokerFacts()) == []        # 4.0 has it; unknown: the driver checks


def test_stream_single_active_consumer_is_refused_before_3_11_naming_the_version() -> None:
    sac = workload(queues={"name": "s", "type": "stream"}, consumer={"single_active": True})
    assert found(sac, V3) == [(ERROR, "consumer.single_active")]
    ((_, f),) = findings(sac, {"c": V3})
    assert "needs RabbitMQ 3.11 or later; RabbitMQ 3.10.8 would deliver every message" in f.message
    assert found(sac, V4) == [] and found(sac, BrokerFacts()) == []          # 4.0 has it; unknown: the driver checks
    assert found(workload(queues={"name": "s", "type": "stream"}), V3) == []


def test_max_message_size_is_the_brokers_own_else_its_versions_default_and_says_which() -> None:
    assert max_message_size(V4)[0] == 16 * MIB and "4.x's default, 16 MiB" in max_message_size(V4)[1]
    assert max_message_size(V3)[0] == 128 * MIB and "3.8 to 3.13's default" in max_message_size(V3)[1]
    read = BrokerFacts(version="4.0.5", max_message_size=1000, source="management API http://h/api")
    assert max_message_size(read) == (1000, "read from the broker, management API http://h/api")
    assert max_message_size(BrokerFacts()) is None and max_message_size(BrokerFacts(version="3.7.0")) is None


def test_a_body_above_the_limit_is_an_error_naming_the_field(tmp_path: Path) -> None:
    big = 20_000_000
    assert found(workload(size=big), V4) == [(ERROR, "size (PerfTest -s)")]
    assert found(workload(size=big), V3) == []                       # 128 MiB on 3.10
    assert found(workload(size=16 * MIB), V4) == []                   # at the limit is allowed
    assert found(workload(size=16 * MIB + 1), V4) == [(ERROR, "size (PerfTest -s)")]
    steps = [{"size": 100, "duration": 1}, {"size": big, "duration": 1}]
    assert found(workload(variable_size=steps), V4) == [(ERROR, "variable_size[1].size (PerfTest -vs)")]
    body = tmp_path / "body.bin"
    body.write_bytes(b"x" * 2000)
    limited = BrokerFacts(version="4.0.5", max_message_size=1000, source="management API")
    (level, where), = found(workload(publisher={"body_files": [str(body)]}), limited)
    assert level == ERROR and where.startswith("publisher.body_files[0] (") and where.endswith(", PerfTest -B)")
    # the stream protocol is not held to max_message_size
    stream = workload(size=big, queues={"name": "s", "type": "stream"})
    assert found(stream, V4) == []


def test_in_memory_limits_of_quorum_queues_are_a_no_op_warning_on_4_only() -> None:
    qq = workload(queues={"name": "q", "type": "quorum", "arguments": {"x-max-in-memory-length": 10,
                                                                       "x-max-in-memory-bytes": 100}})
    assert found(qq, V4) == [(WARNING, "queues.arguments.x-max-in-memory-length (PerfTest -qa)"),
                             (WARNING, "queues.arguments.x-max-in-memory-bytes (PerfTest -qa)")]
    assert found(qq, V4_PROBE_ONLY) == found(qq, V4)                  # the version is enough
    assert found(qq, V3) == []
    assert found(workload(queues={"name": "q", "type": "quorum"}), V4) == []


def test_transient_non_exclusive_queues_follow_the_brokers_deprecation_phase() -> None:
    transient = workload(queues={"pattern": "t-%d", "from": 1, "to": 5, "durable": False})
    assert found(transient, V4) == [(WARNING, "queues.durable")]
    (_, f), = findings(transient, {"c": V4})
    assert "t-1, t-2, t-3 and 2 more" in f.message and "permitted by default" in f.message
    assert found(transient, V4_PROBE_ONLY) == [(WARNING, "queues.durable")]     # no management API: by version
    assert found(transient, V3) == []
    denied = BrokerFacts(version="4.2.0", deprecated_features=(DeprecatedFeature("transient_nonexcl_queues",
                                                                                 "denied_by_default"),))
    assert found(transient, denied) == [(WARNING, "queues.durable")]
    (_, f), = findings(transient, {"c": denied})
    assert "declared durable instead, on every cluster of this run" in f.message
    for fine in ({"name": "q", "durable": False, "exclusive": True}, {"name": "q"},
                 {"name": "q", "durable": False, "predeclared": True}):
        assert found(workload(queues=fine), V4) == [], fine


def test_where_the_broker_refuses_transient_queues_the_run_declares_them_durable_and_says_so_once() -> None:
    transient = workload(queues={"name": "t", "durable": False})
    v43 = BrokerFacts(version="4.3.0")              # no management API: the version says it
    out = io.StringIO()
    ran = check_broker_limits(transient, {"c": v43}, out)
    assert ran.queues.durable and not transient.queues.durable
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rbench: warning: cluster c: queues.durable: queue(s) t would be "
                                                   "transient and not exclusive")
    assert "declared durable instead" in lines[0]
    for kept in (V4, V3):                           # 4.0 still has them: declared as written (4.0 with a warning)
        assert not check_broker_limits(transient, {"c": kept}, io.StringIO()).queues.durable
    exclusive = workload(queues={"name": "t", "durable": False, "exclusive": True})
    assert check_broker_limits(exclusive, {"c": v43}, io.StringIO()) is exclusive


def test_which_brokers_refuse_transient_queues_one_rule_for_run_and_scalability() -> None:
    from rbench.samples.broker_facts import transient_queues_removed

    assert transient_queues_removed((4, 3)) and transient_queues_removed((5,)) and transient_queues_removed((4, 3, 1))
    assert not transient_queues_removed((4, 2, 9)) and not transient_queues_removed(())
    assert transient_queues_removed((4, 0, 5), "denied_by_default") and not transient_queues_removed((4, 0, 5), "permitted_by_default")
    assert BrokerFacts(version="4.3.0-rc.1").transient_queues_removed() and not V4.transient_queues_removed()


def test_mirroring_arguments_are_an_error_on_4_and_a_warning_on_3() -> None:
    ha = workload(queues={"name": "q", "arguments": {"ha-mode": "all"}})
    assert found(ha, V4) == [(ERROR, "queues.arguments.ha-mode (PerfTest -qa)")]
    assert found(ha, V4_PROBE_ONLY) == [(ERROR, "queues.arguments.ha-mode (PerfTest -qa)")]
    assert found(ha, V3) == [(WARNING, "queues.arguments.ha-mode (PerfTest -qa)")]
    (_, f), = findings(ha, {"c": V4})
    assert "removed in RabbitMQ 4.0" in f.message and "classic_queue_mirroring: removed" in f.message


def test_warnings_are_printed_once_each_and_the_first_error_is_one_line() -> None:
    w = workload(size=20_000_000, queues={"name": "q", "durable": False, "arguments": {"ha-mode": "all"}})
    out = io.StringIO()
    with pytest.raises(ConfigError) as caught:
        check_broker_limits(w, {"c": V4}, out=out)
    assert str(caught.value).startswith("cluster c: size (PerfTest -s): a 20,000,000-byte body is above RabbitMQ "
                                        "4.0.5's max_message_size, 16,777,216 bytes (RabbitMQ 4.x's default")
    assert "\n" not in str(caught.value)
    (line,) = out.getvalue().splitlines()
    assert line.startswith("rbench: warning: cluster c: queues.durable: queue(s) q would be transient")
    quiet = io.StringIO()
    check_broker_limits(workload(), {"c": V4}, out=quiet)             # nothing to say: nothing printed
    assert quiet.getvalue() == ""
    check_broker_limits(w, {}, out=quiet)                             # a cluster not read: no rule applies
