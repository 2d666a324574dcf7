"""A run on RabbitMQ 4.0.5 through the CLI: what it was measured on is in run.json, the summary, the report,
steps.csv and leaderboard.md, and 4.0's deprecation of its transient queues was said once before the load."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rbench.cli import main
from rbench.samples.record import read_run_record
from tests.brokers import RABBITMQ_4
from tests.runhelpers import workload_dict


def test_a_run_on_4_0_names_its_broker_everywhere(spark, unique_name: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    RABBITMQ_4.require()
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(workload_dict(RABBITMQ_4.amqp_url, unique_name, driver="amqp091", producers=1, consumers=1,
                                          rate=100, duration=2, queues={"from": 1, "to": 1},
                                          broker_metrics={"management_urls": [RABBITMQ_4.management_url],
                                                          "prometheus_urls": [RABBITMQ_4.prometheus_url]})))
    assert main(["run", str(f), "--out", str(tmp_path / "out"), "--master", "local[2]"]) == 0
    captured = capsys.readouterr()
    (warning,) = [ln for ln in captured.err.splitlines() if "rbench: warning:" in ln]
    assert warning.startswith(f"rbench: warning: cluster local: queues.durable: queue(s) {unique_name}-1 would be "
                              "transient and not exclusive, which RabbitMQ 4.0.5 deprecates")
    run_dir = next((tmp_path / "out").iterdir())
    facts = read_run_record(run_dir).clusters[0].broker
    assert facts is not None and facts.version == "4.0.5" and facts.erlang is not None
    line = f"local: broker: RabbitMQ 4.0.5 (Erlang {facts.erlang}), cluster {facts.cluster_name}, node rabbit4@localhost, khepri_db off"
    assert line in captured.out.splitlines()
    page = (run_dir / "report" / "report.html").read_text()
    assert "step(s) · RabbitMQ 4.0.5 · " in page                        # the header
    assert f"local: RabbitMQ 4.0.5 (Erlang {facts.erlang})" in page      # the Runs table
    with open(run_dir / "report" / "steps.csv") as fh:
        assert [r["broker"] for r in csv.DictReader(fh)] == ["RabbitMQ 4.0.5"]
    board = (run_dir / "report" / "leaderboard.md").read_text()
    assert f"- {run_dir.name}, cluster local: RabbitMQ 4.0.5 (Erlang {facts.erlang})" in board
    top = next(ln for ln in board.split("## Top throughput per cluster")[1].splitlines() if ln.startswith("| 1 | local"))
    assert top.endswith("| RabbitMQ 4.0.5 |")
