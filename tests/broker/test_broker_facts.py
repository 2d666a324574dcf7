"""What a run records it was measured on, read from RabbitMQ 3.10.8 and 4.0.5, and 4.0's rules at validation.

Each test runs the run sequence's own steps in its order (rbench.coordinator.sequence): the probe (which says
who answered), the sampler's endpoint check, the facts, then the broker's limits, on the real brokers of
tests/brokers.py."""
from __future__ import annotations

import base64
import io
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.config.model import Workload
from rbench.coordinator.broker_facts import PROBE_SOURCE, read_broker_facts
from rbench.coordinator.broker_identity import check_sampled_brokers
from rbench.coordinator.broker_limits import ERROR, WARNING, check_broker_limits, findings
from rbench.coordinator.run import probe_clusters
from rbench.plan import plan_run
from rbench.samples.broker_facts import BrokerFacts
from rbench.samples.record import read_run_record
from rbench.samples.runinfo import RunInfo
from tests.brokers import RABBITMQ_3, RABBITMQ_4, Broker
from tests.runhelpers import workload_dict

AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


def _api(broker: Broker, path: str) -> Any:
    req = urllib.request.Request(f"{broker.management_url}/{path}", headers={"Authorization": AUTH})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def _own(broker: Broker, name: str, driver: str = "amqp091", **overrides: Any) -> Workload:
    """A workload on ``broker`` with its own management and Prometheus endpoints named."""
    metrics = {"management_urls": [broker.management_url], "prometheus_urls": [broker.prometheus_url]}
    return workload_from_dict(workload_dict(broker.amqp_url, name, driver=driver, broker_metrics=metrics, **overrides))


def _facts(w: Workload) -> BrokerFacts:
    answered = probe_clusters(w)
    w = check_sampled_brokers(w, answered)
    return read_broker_facts(w, answered)["local"]


@pytest.mark.parametrize("driver", ["amqp091", "aiopika", "amqp10"])
def test_the_probe_says_who_answered_with_every_amqp_driver(broker: Broker, driver: str) -> None:
    (who,) = probe_clusters(_own(broker, "facts", driver)).values()
    overview = _api(broker, "overview")
    assert who.version == overview["rabbitmq_version"] and who.version.startswith(broker.version_prefix)
    assert who.cluster_name == overview["cluster_name"] and who.product == "RabbitMQ"
    assert who.platform == f"Erlang/OTP {overview['erlang_version']}"


def test_the_stream_probe_says_who_answered_too(broker: Broker) -> None:
    w = workload_from_dict(workload_dict(broker.amqp_url, "facts", driver="stream",
                                         clusters=[{"name": "local", "uris": [broker.amqp_url],
                                                    "stream_uris": [broker.stream_url]}],
                                         queues={"pattern": "facts-s-%d", "type": "stream", "durable": True,
                                                 "auto_delete": False}))
    (who,) = probe_clusters(w).values()
    assert who.version is not None and who.version.startswith(broker.version_prefix)
    assert who.cluster_name == _api(broker, "overview")["cluster_name"]


def test_the_facts_are_the_brokers_and_survive_run_json(broker: Broker, tmp_path: Path) -> None:
    w = _own(broker, "facts")
    facts = _facts(w)
    overview = _api(broker, "overview")
    listed = {f["name"]: f["state"] for f in _api(broker, "feature-flags")}
    assert facts.product == "RabbitMQ" and facts.version == overview["rabbitmq_version"]
    assert facts.version.startswith(broker.version_prefix)
    assert facts.erlang == overview["erlang_version"] and facts.erlang.startswith("27." if broker is RABBITMQ_4 else "25.")
    assert facts.cluster_name == overview["cluster_name"] and facts.nodes == (overview["node"],)
    assert {f.name: f.state for f in facts.feature_flags or ()} == listed
    assert facts.source == f"management API {broker.management_url}"
    assert facts.metadata_store == "mnesia"                           # neither broker runs Khepri here
    if broker is RABBITMQ_4:
        assert facts.flag_state("khepri_db") == "disabled"
        assert facts.line() == (f"RabbitMQ {facts.version} (Erlang {facts.erlang}), cluster {facts.cluster_name}, "
                                f"node {overview['node']}, khepri_db off")
        assert facts.deprecation_phase("classic_queue_mirroring") == "removed"
        assert facts.deprecation_phase("transient_nonexcl_queues") == "permitted_by_default"
    else:
        assert facts.flag_state("khepri_db") is None and facts.deprecated_features is None    # 3.10 has neither
        assert facts.line().endswith("Mnesia (no khepri_db flag)")
    assert facts.max_message_size is None                 # neither management API exposes it
    # into run.json and back, as the run writes it
    plan = plan_run(w, "run-1", str(tmp_path), {"local": 1})
    info = RunInfo(tmp_path / "run-1", plan, w.model_dump(mode="json", by_alias=True), "hash", brokers={"local": facts})
    info.write()
    record = read_run_record(tmp_path / "run-1")
    assert record.clusters[0].broker == facts and record.broker_version(record.clusters[0]) == facts.version


def test_without_its_management_api_the_facts_are_the_probes_and_say_so() -> None:
    """4.0 with the sampler's ports set to 3.10's (15672/15692 on the same host): that API answers for another
    cluster, so it is not believed; the probe's facts stand, flags unread. (Left to its defaults, rbench asks
    4.0 for its own listeners: rbench.coordinator.broker_endpoints.)"""
    RABBITMQ_3.require()
    RABBITMQ_4.require()
    w = workload_from_dict(workload_dict(RABBITMQ_4.amqp_url, "facts", broker_metrics={
        "management_port": RABBITMQ_3.management_port, "prometheus_port": RABBITMQ_3.prometheus_port}))
    err = io.StringIO()
    answered = probe_clusters(w)
    facts = read_broker_facts(check_sampled_brokers(w, answered, out=err), answered)["local"]
    assert facts.version is not None and facts.version.startswith("4.0") and facts.source == PROBE_SOURCE
    assert facts.feature_flags is None and facts.erlang is not None and facts.erlang.startswith("27.")
    assert "feature flags not read" in facts.line()


# ---- 4.0's limits and deprecations, with the real probe: one test per rule, on both brokers ---------------

def _found(broker: Broker, **overrides: Any) -> list[tuple[str, str, str]]:
    w = _own(broker, "limits", **overrides)
    return [(f.level, f.field, f.message) for _, f in findings(w, {"local": _facts(w)})]


def test_a_body_above_max_message_size(broker: Broker) -> None:
    found = _found(broker, size=20_000_000, queues={"durable": True})
    if broker is RABBITMQ_4:
        ((level, field, message),) = found
        assert level == ERROR and field == "size (PerfTest -s)"
        assert "16,777,216 bytes (RabbitMQ 4.x's default, 16 MiB: the broker does not expose its setting" in message
    else:
        assert found == []                     # 3.10's 128 MiB


def test_x_max_in_memory_length_on_a_quorum_queue(broker: Broker) -> None:
    found = _found(broker, queues={"type": "quorum", "durable": True, "auto_delete": False,
                                   "arguments": {"x-max-in-memory-length": 100}})
    if broker is RABBITMQ_4:
        ((level, field, message),) = found
        assert level == WARNING and field == "queues.arguments.x-max-in-memory-length (PerfTest -qa)"
        assert f"ignored by RabbitMQ {broker.version_prefix}" in message and "no-op" in message
    else:
        assert found == []


def test_a_transient_non_exclusive_queue(broker: Broker) -> None:
    found = _found(broker)                     # workload_dict's queues: durable false, auto-delete
    if broker is RABBITMQ_4:
        ((level, field, message),) = found
        assert level == WARNING and field == "queues.durable"
        assert message.startswith("queue(s) limits-1, limits-2 would be transient and not exclusive, which RabbitMQ 4.0")
        assert "deprecated feature transient_nonexcl_queues: permitted by default" in message
    else:
        assert found == []


def test_a_mirroring_argument(broker: Broker) -> None:
    found = _found(broker, queues={"durable": True, "arguments": {"ha-mode": "all"}})
    ((level, field, message),) = found
    assert field == "queues.arguments.ha-mode (PerfTest -qa)"
    if broker is RABBITMQ_4:
        assert level == ERROR and "classic_queue_mirroring: removed" in message
    else:
        assert level == WARNING and "ignores it as a queue argument" in message


def test_the_cli_refuses_before_any_load_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rbench run` and `rbench perftest` of a 20 MB body on 4.0: exit 2, one line naming the field, no run started."""
    from rbench.cli import main

    RABBITMQ_4.require()
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(workload_dict(RABBITMQ_4.amqp_url, "limits-cli", size=20_000_000, queues={"durable": True},
                                          broker_metrics={
        "management_urls": [RABBITMQ_4.management_url], "prometheus_urls": [RABBITMQ_4.prometheus_url]})))
    assert main(["run", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cluster local: size (PerfTest -s): a 20,000,000-byte body" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert main(["perftest", "-h", RABBITMQ_4.amqp_url, "-s", "20000000", "-z", "1", "-f", "persistent",
                 "--out", str(tmp_path / "pt")]) == 2
    *notes, error = capsys.readouterr().err.splitlines()     # 4.0's own sampler endpoints are found: no
    assert not any("not sampling" in n for n in notes)          # guess of 3.10's is left out with a warning
    assert "cluster default: size (PerfTest -s): a 20,000,000-byte body" in error


def test_the_checks_after_the_probe_open_no_connection_of_their_own(broker: Broker,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler's check, the facts and the rules take the probe's answer: with AMQP connections made
    impossible after the probe, they still run (they used to open a second connection per cluster)."""
    import rbench.drivers.amqp091_connect as amqp

    w = _own(broker, "facts")
    answered = probe_clusters(w)

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a second AMQP connection was opened")

    monkeypatch.setattr(amqp, "connect", refused)
    assert check_sampled_brokers(w, answered) is w
    facts = read_broker_facts(w, answered)
    check_broker_limits(w, facts, out=io.StringIO())
    assert facts["local"].version == answered["local"].version


def test_facts_come_from_the_clusters_own_management_endpoint() -> None:
    """A cluster's own broker_metrics (4.0 beside 3.10: compare-3.10-4.0.yaml, faults-local-4.yaml) is where its
    facts are read, not the workload's default guess (the AMQP host at 15672, 3.10's here)."""
    RABBITMQ_3.require()
    RABBITMQ_4.require()
    data = workload_dict(RABBITMQ_4.amqp_url, "facts-own")
    data["clusters"][0]["broker_metrics"] = {"management_urls": [RABBITMQ_4.management_url],
                                             "prometheus_urls": [RABBITMQ_4.prometheus_url]}
    facts = _facts(workload_from_dict(data))
    assert facts.source == f"management API {RABBITMQ_4.management_url}"
    assert facts.version is not None and facts.version.startswith("4.0")
    assert facts.feature_flags is not None and any(f.name == "khepri_db" for f in facts.feature_flags)
