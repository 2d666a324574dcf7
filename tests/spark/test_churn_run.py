"""A run with a churn step through the CLI (issue 32): steps.csv, the summary and the report give the churned
connections and the broker's CPU per churned connection against the step before it. Low rates (20 connections/s
for 4 s); nothing here asserts a speed, only that every figure is there and consistent."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rbench.cli import main
from tests.runhelpers import workload_dict


def test_a_churn_step_reports_broker_cpu_per_churned_connection(spark, amqp_url: str, unique_name: str,
                                                               tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(workload_dict(
        amqp_url, unique_name, driver="amqp091", producers=1, consumers=1, rate=None, duration=None, tasks=1,
        rate_steps=[{"rate": 20, "duration": 4}, {"rate": 20, "duration": 4, "churn": {"rate": "20/s"}}],
        queues={"from": 1, "to": 1})))
    assert main(["run", str(f), "--out", str(tmp_path / "out"), "--master", "local[2]"]) == 0
    out = capsys.readouterr().out
    run_dir = next((tmp_path / "out").iterdir())
    with open(run_dir / "report" / "steps.csv") as fh:
        plain, churned = list(csv.DictReader(fh))
    assert plain["churn_target_per_s"] == "" and plain["broker_cpu_ms_per_churn"] == ""
    assert float(churned["churn_target_per_s"]) == 20.0
    assert 0 < int(churned["churned"]) <= 80 and churned["churn_baseline_step"] == "0"
    assert churned["broker_cpu_ms_per_churn"] != ""           # broker sampled (3.10 on this host: beam CPU from /proc)
    (line,) = [ln for ln in out.splitlines() if ln.startswith("local step 2: churn ")]
    assert "against step 1: broker CPU " in line and " ms per churned connection" in line
    page = (run_dir / "report" / "report.html").read_text()
    assert "broker CPU ms per churned connection" in page and "churn: connections each task opened" in page
