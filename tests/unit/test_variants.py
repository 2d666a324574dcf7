"""Broker variants (scripts/variant.sh, conf/variants/, rbench.config.variants): their ports clash with no
other broker's on this machine, a bad variant is one line, and run.json keeps the settings."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rbench.config.load import workload_from_dict
from rbench.config.variants import load_variant, variant_names
from rbench.errors import ConfigError
from rbench.faults.executor import script_path
from rbench.plan import plan_run
from rbench.samples.record import read_run_record
from rbench.samples.runinfo import RunInfo
from rbench.samples.variant import BrokerVariant, erlang_compact
from tests.runhelpers import workload_dict
from tests.variant_layout import layouts, run_script

SYSTEM_BROKER = {5672, 5552, 15672, 15692, 25672}       # RabbitMQ 3.10: AMQP, streams, management, Prometheus, dist
BROKER4 = {5680, 5580, 15680, 15780, 25680}             # scripts/broker4.sh's rabbit4@localhost


def _cluster_ports(version: str) -> set[int]:
    env = {k: v for k, v in os.environ.items() if k not in ("RBENCH_CLUSTER_DIR", "RBENCH_CLUSTER_VERSION")}
    env["RBENCH_CLUSTER_VERSION"] = version
    info = subprocess.run(["bash", str(script_path()), "info", "9"], capture_output=True, text=True, check=True,
                          env=env).stdout
    return {int(w.split("=")[1]) for line in info.splitlines() for w in line.split()
            if w.split("=")[0] in ("amqp", "management", "prometheus", "stream", "dist")}


def test_every_variant_slot_clashes_with_no_other_broker_on_this_machine(tmp_path: Path) -> None:
    """Slots 0-9 (all of them, not only the shipped variants') against the system broker, broker4.sh and both
    cluster.sh layouts at their largest (9 nodes), and against each other."""
    for slot in range(10):
        (tmp_path / f"v{slot}.conf").write_text(f"# slot: {slot}\n")
    found = layouts(env={"RBENCH_VARIANTS_DIR": str(tmp_path)})
    assert len(found) == 10
    ports = [p for v in found.values() for p in v.ports.values()]
    assert len(set(ports)) == len(ports) == 50
    others = SYSTEM_BROKER | BROKER4 | _cluster_ports("3") | _cluster_ports("4")
    assert len(others) == 10 + 45 + 45 and not set(ports) & others
    assert found["v1"].ports == {"amqp": 5691, "stream": 5591, "management": 15661, "prometheus": 15761, "dist": 25691}
    assert found["v1"].node == "rabbit4-v1@localhost"


def test_the_shipped_variants_have_slots_of_their_own() -> None:
    found = layouts()
    assert set(found) == set(variant_names()) >= {"tuned", "khepri"}
    assert len({v.slot for v in found.values()}) == len(found)
    assert found["tuned"].ports["amqp"] == 5691 and found["khepri"].ports["amqp"] == 5692


@pytest.mark.parametrize(("files", "args", "expected"), [
    ({}, ("start", "nope"), "no variant 'nope'"),
    ({}, ("info", "Bad-Name"), "expected a variant name"),
    ({"a.conf": "x = 1\n"}, ("info", "a"), "expected a line '# slot: S'"),
    ({"a.conf": "# slot: 12\n"}, ("info", "a"), "slot 12: expected 0 to 9"),
    ({"a.conf": "# slot: 3\n", "b.conf": "# slot: 3\n"}, ("info", "a"), "slot 3 is also b's"),
])
def test_a_bad_variant_is_one_line(tmp_path: Path, files: dict[str, str], args: tuple[str, ...], expected: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    out = run_script(*args, env={"RBENCH_VARIANTS_DIR": str(tmp_path)})
    assert out.returncode != 0 and out.stderr.count("\n") == 1 and expected in out.stderr, out.stderr


def test_the_tuned_variant_holds_the_seeds_flow_control_values() -> None:
    tuned = load_variant("tuned")
    assert tuned.rabbitmq_conf == () and tuned.feature_flags == ()
    term = erlang_compact(tuned.advanced_config or "")
    for setting in ("{credit_flow_default_credit, {5000, 2500}}", "{max_incoming_window, 5000}",
                    "{max_link_credit, 2000}", "{max_queue_credit, 5000}"):
        assert setting in term
    assert "%" not in term and tuned.line().startswith("variant tuned: advanced.config [{rabbit, [")
    khepri = load_variant("khepri")
    assert khepri.feature_flags == ("khepri_db",) and khepri.advanced_config is None
    assert khepri.line() == "variant khepri: feature flags after boot: khepri_db"


def test_erlang_comments_go_but_strings_stay() -> None:
    assert erlang_compact('[{a, "50%"}, %% note\n {b, 1}].') == '[{a, "50%"}, {b, 1}].'
    v = BrokerVariant.from_texts("x", "# c\n\nheartbeat = 30\n", None, "# none\n", "/d")
    assert v.rabbitmq_conf == ("heartbeat = 30",) and v.feature_flags == () and v.settings() == "rabbitmq.conf heartbeat = 30"
    assert BrokerVariant.from_texts("y", "", "[].", None, "/d").settings() == "the broker's defaults"


def test_a_workload_naming_a_missing_variant_is_refused_in_one_line() -> None:
    d = workload_dict("amqp://guest:guest@127.0.0.1:5691/", "v")
    d["clusters"][0]["variant"] = "fast"
    with pytest.raises(ConfigError) as err:
        workload_from_dict(d)
    msg = str(err.value)
    assert "\n" not in msg and "clusters" in msg and "variant" in msg and "no variant 'fast'" in msg and "tuned" in msg


def test_run_json_records_the_variant_and_its_settings(tmp_path: Path) -> None:
    d = workload_dict("amqp://guest:guest@127.0.0.1:5691/", "v")
    d["clusters"][0]["variant"] = "tuned"
    w = workload_from_dict(d)
    plan = plan_run(w, "run-1", str(tmp_path), {"local": 1})
    RunInfo(tmp_path / "run-1", plan, w.model_dump(mode="json", by_alias=True), "h").write()
    raw = json.loads((tmp_path / "run-1" / "run.json").read_text())
    assert raw["clusters"][0]["variant"]["name"] == "tuned"
    assert "max_link_credit" in raw["clusters"][0]["variant"]["advanced_config"]
    record = read_run_record(tmp_path / "run-1")
    assert record.clusters[0].variant == load_variant("tuned")
    plain = plan_run(workload_from_dict(workload_dict("amqp://guest:guest@127.0.0.1:5680/", "v")), "run-2",
                     str(tmp_path), {"local": 1})
    RunInfo(tmp_path / "run-2", plain, {}, "h").write()
    assert read_run_record(tmp_path / "run-2").clusters[0].variant is None
