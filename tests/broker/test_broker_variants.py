"""A broker variant boots from conf/variants/ with its settings applied, and a run on it records them.

Marked ``variant``: each test starts its variant's node with scripts/variant.sh (about 10-15 s here) and stops
it again if it started it; skipped where RabbitMQ 4.0's root is not built (`make broker-4`)."""
from __future__ import annotations

import base64
import json
import os
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.config.variants import load_variant
from rbench.coordinator.broker_facts import read_broker_facts
from rbench.coordinator.broker_identity import check_sampled_brokers
from rbench.coordinator.run import probe_clusters
from rbench.plan import plan_run
from rbench.samples.record import read_run_record
from rbench.samples.runinfo import RunInfo
from rbench.samples.variant import erlang_compact
from tests.runhelpers import workload_dict
from tests.variant_layout import VariantLayout, layouts, run_script

pytestmark = pytest.mark.variant
ROOT = Path(os.environ.get("RBENCH_BROKER4_ROOT", "/var/lib/rbench/rabbitmq-4"))
AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


def _running(name: str) -> bool:
    return run_script("status", name).returncode == 0


def _variant(name: str) -> Iterator[VariantLayout]:
    if not (ROOT / ".rbench-ready").exists():
        pytest.skip(f"RabbitMQ 4.0's root {ROOT} is not built: `make broker-4` builds it")
    was_up = _running(name)
    started = run_script("start", name, timeout=180)
    assert started.returncode == 0, started.stderr
    yield layouts(name)[name]
    if not was_up:
        run_script("stop", name, timeout=90)


@pytest.fixture(scope="module")
def tuned() -> Iterator[VariantLayout]:
    yield from _variant("tuned")


@pytest.fixture(scope="module")
def khepri() -> Iterator[VariantLayout]:
    yield from _variant("khepri")


def _api(v: VariantLayout, path: str) -> Any:
    req = urllib.request.Request(f"{v.management_url}/{path}", headers={"Authorization": AUTH})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def test_the_tuned_node_runs_with_the_variants_settings(tuned: VariantLayout) -> None:
    """Every {Key, Value} of tuned.advanced.config is in the node's application environment as the broker
    reads it back (`rabbitmqctl environment`), so no setting was misspelt or ignored."""
    env = run_script("ctl", "tuned", "environment")
    assert env.returncode == 0, env.stderr
    compact = re.sub(r"\s", "", env.stdout)
    settings = re.findall(r"\{(\w+), (\{[^{}]*\}|\w+)\}", erlang_compact(load_variant("tuned").advanced_config or ""))
    assert {k for k, _ in settings} == {"credit_flow_default_credit", "max_incoming_window", "max_link_credit",
                                        "max_queue_credit"}
    for key, value in settings:
        assert "{" + key + "," + value.replace(" ", "") + "}" in compact, key
    assert _api(tuned, "overview")["node"] == tuned.node == "rabbit4-tuned@localhost"


def test_a_run_on_a_variant_records_the_variant_and_the_broker_that_answered(tuned: VariantLayout, tmp_path: Path) -> None:
    metrics = {"management_urls": [tuned.management_url], "prometheus_urls": [tuned.prometheus_url]}
    d = workload_dict(tuned.amqp_url, "variant", broker_metrics=metrics)
    d["clusters"][0]["variant"] = "tuned"
    w = workload_from_dict(d)
    answered = probe_clusters(w)
    facts = read_broker_facts(check_sampled_brokers(w, answered), answered)
    plan = plan_run(w, "run-1", str(tmp_path), {"local": 1})
    RunInfo(tmp_path / "run-1", plan, w.model_dump(mode="json", by_alias=True), "h", brokers=facts).write()
    cluster = read_run_record(tmp_path / "run-1").clusters[0]
    assert cluster.variant == load_variant("tuned")
    assert cluster.broker is not None and cluster.broker.nodes == (tuned.node,)
    assert cluster.broker.version is not None and cluster.broker.version.startswith("4.0")


def test_the_khepri_node_keeps_its_metadata_in_khepri(khepri: VariantLayout) -> None:
    flags = {f["name"]: f["state"] for f in _api(khepri, "feature-flags")}
    assert flags["khepri_db"] == "enabled"
    w = workload_from_dict(workload_dict(khepri.amqp_url, "variant", broker_metrics={
        "management_urls": [khepri.management_url], "prometheus_urls": [khepri.prometheus_url]}))
    answered = probe_clusters(w)
    facts = read_broker_facts(check_sampled_brokers(w, answered), answered)["local"]
    assert facts.metadata_store == "khepri" and facts.line().endswith("khepri_db on")
