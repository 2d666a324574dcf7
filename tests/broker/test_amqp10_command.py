"""`rbench amqp10 URL`: the quiver-style command end to end (two child processes, real broker)."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rbench.cli import main

pytestmark = pytest.mark.timeout(120)


def test_the_command_prints_quivers_table_and_results_and_writes_json_and_parquet(
        amqp_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = 3000
    code = main(["amqp10", amqp_url, "--count", str(n), "--body-size", "32", "--credit", "200",
                 "--output", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Sender" in out and "Receiver" in out and "Latency [ms]" in out
    assert "End-to-end rate:" in out and "99.99%" in out and "guest:***@" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["results"]["message_count"] == n and summary["configuration"]["credit_window"] == 200
    assert len(summary["results"]["latency_nines"]) == 3 and summary["results"]["message_rate"] > 0
    assert summary["rbench"]["lost"] == 0 and "guest:***@" in summary["configuration"]["url"]
    samples = pq.read_table(tmp_path / "samples.parquet")
    assert samples.num_rows == n
    assert sorted(samples["seq"].to_pylist()) == list(range(n))                  # each once
    lat = [r - s for r, s in zip(samples["t_received"].to_pylist(), samples["t_sent"].to_pylist())]
    assert min(lat) > 0


def test_bad_options_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["amqp10", "amqp://guest:s3cret@127.0.0.1:5672/?address=v9", "--count", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "address: expected v1" in err and "s3cret" not in err
    assert main(["amqp10", "amqp://guest:guest@127.0.0.1:5672/", "--count", "ten"]) == 2
    assert "--count" in capsys.readouterr().err
