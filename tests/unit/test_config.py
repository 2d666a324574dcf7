"""Workload validation: good files load, bad ones give one line naming the field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbench.cli import main
from rbench.config.load import load_workload, workload_from_dict, workload_schema
from rbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
BASE = {"name": "t", "clusters": [{"name": "a", "uris": ["amqp://guest:guest@127.0.0.1:5672/"]}], "duration": 5}


def with_(**changes: object) -> dict[str, object]:
    return {**BASE, **changes}


@pytest.mark.parametrize("path", sorted((ROOT / "conf" / "workloads").glob("*.yaml")))
def test_committed_workloads_validate(path: Path) -> None:
    w = load_workload(path)
    assert w.clusters and w.steps()


@pytest.mark.parametrize("change, field, expected", [
    ({"rate": -5}, "rate", "rate > 0"),
    ({"rat": 5}, "rat", "unknown field"),
    ({"size": "big"}, "size", "integer"),
    ({"duration": "ten"}, "duration", "duration such as"),
    ({"clusters": [{"name": "a", "uris": ["http://x"]}]}, "clusters.0.uris", "amqp://"),
    ({"clusters": []}, "clusters", "at least 1"),
    ({"queues": {"pattern": "q-%d", "from": 5, "to": 2}}, "queues", "to: expected a number >= from"),
    ({"queues": {"pattern": "q"}}, "queues", "%d"),
    ({"queues": {"type": "quorum", "durable": False}}, "queues", "always durable"),
    ({"queues": {"type": "lazy"}}, "queues.type", "'classic', 'quorum' or 'stream'"),
    ({"consumer": {"offset": "middle"}}, "consumer.offset", "first, last, next"),
    ({"rate_steps": [{"rate": 10, "duration": 0}]}, "rate_steps.0.duration", "greater than 0"),
    ({"warmup": 10}, "", "warmup: expected less than"),
    ({"driver": "kafka"}, "driver", "amqp091"),
])
def test_bad_field_is_one_line_naming_it(change: dict[str, object], field: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        workload_from_dict(with_(**change), source="w.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"w.yaml: {field}" if field else "w.yaml: ")
    assert expected in message


def test_missing_duration_and_count_is_refused() -> None:
    data = dict(BASE)
    del data["duration"]
    with pytest.raises(ConfigError, match="duration: expected a duration, rate_steps or publisher.message_count"):
        workload_from_dict(data)


def test_env_interpolation_and_missing_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "w.yaml"
    f.write_text("name: t\nclusters: [{name: a, uris: ['${RB_TEST_URI}']}]\nduration: 1\n")
    with pytest.raises(ConfigError, match="RB_TEST_URI is not set"):
        load_workload(f)
    monkeypatch.setenv("RB_TEST_URI", "amqp://u:p@h:5672/")
    assert load_workload(f).clusters[0].uris == ["amqp://u:p@h:5672/"]


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text("name: t\nclusters: [\n")
    with pytest.raises(ConfigError, match=r"w.yaml: line \d+"):
        load_workload(f)


def test_variable_rate_cycles_until_duration() -> None:
    w = workload_from_dict(with_(duration=25, variable_rate=[{"rate": 10, "duration": 10}, {"rate": 20, "duration": 5}]))
    assert [(s.rate, s.duration) for s in w.steps()] == [(10, 10), (20, 5), (10, 10)]


def test_durations_accept_units() -> None:
    w = workload_from_dict(with_(duration="2m", warmup="1500ms", consumer={"processing_delay": "250us"}))
    assert w.duration == 120 and w.warmup == 1.5 and w.consumer.processing_delay == pytest.approx(250e-6)


def test_committed_schema_matches_model() -> None:
    committed = json.loads((ROOT / "conf" / "workload.schema.json").read_text())
    assert committed == workload_schema(), "run `rbench validate --schema > conf/workload.schema.json`"


def test_cli_validate_prints_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("name: t\nclusters: [{name: a, uris: [amqp://x]}]\nduration: 1\nproducers: -1\n")
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "producers" in err and "Traceback" not in err


def test_validate_checks_prices_before_printing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "conf" / "workloads" / "cluster-sizing.yaml").read_text().replace("m5.xlarge", "m9.huge")
    f = tmp_path / "w.yaml"
    f.write_text(text)
    assert main(["validate", str(f)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "instance_type 'm9.huge' has no price" in captured.err and captured.err.count("\n") == 1
    assert main(["validate", str(ROOT / "conf" / "workloads" / "cluster-sizing.yaml")]) == 0
    assert "qq-3x-m5xlarge: 3 × m5.xlarge + 100 GB gp3" in capsys.readouterr().out
