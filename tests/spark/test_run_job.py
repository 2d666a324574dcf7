"""`rbench run` through a real local[2] Spark session and the real broker."""
from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from rbench.cli import main
from rbench.config.load import workload_from_dict
from rbench.coordinator.run import run_workload
from rbench.reduce.job import reduce_runs
from rbench.samples.record import RunRecord
from tests.runhelpers import keys, read, run_json, workload_dict

DRIVER = "aiopika"
try:
    import rbench.drivers.amqp091  # noqa: F401
    DRIVER = "amqp091"
except ImportError:
    pass


def test_ten_seconds_at_2x1000_reaches_target_within_one_percent(spark, amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    w = workload_from_dict(workload_dict(amqp_url, unique_name, driver=DRIVER, producers=2, consumers=2, rate=1000,
                                         duration=10, warmup=1))
    out = io.StringIO()
    result = run_workload(w, tmp_path, spark, out=out)
    assert result.status == "complete"
    info = run_json(result.run_dir)
    assert info["status"] == "complete" and info["clusters"][0]["tasks"] == 2
    # the run record reads a real run.json and writes it back byte for byte (rbench.samples.record)
    assert RunRecord.from_json(info).to_json() == info and result.record == RunRecord.from_json(info)
    assert json.dumps(result.record.to_json(), indent=2) == (result.run_dir / "run.json").read_text()
    assert info["clusters"][0]["steps"][0]["start_ns"] == info["clusters"][0]["t0_ns"]
    assert info["control_refused"] == [] and "refused" not in out.getvalue()     # the tasks got in, no one else tried
    published, consumed = read(result.run_dir, "published"), read(result.run_dir, "consumed")
    # Parquet rows equal message counts, and every sequence number arrives exactly once
    results = info["clusters"][0]["task_results"]
    assert published.num_rows == sum(r["published"] for r in results)
    assert published.num_rows == pytest.approx(20_000, rel=0.01)
    assert consumed.num_rows == sum(r["consumed"] for r in results)
    counts = Counter(keys(consumed))
    assert set(counts) == set(keys(published)) and max(counts.values()) == 1
    assert set(published["task"].to_pylist()) == {0, 1}
    (row,) = reduce_runs([result.run_dir], session=spark, render=False).steps
    assert row["publish_rate"] == pytest.approx(2000, rel=0.01)
    assert row["consume_rate"] == pytest.approx(2000, rel=0.01)
    assert row["lost"] == 0 and row["duplicated"] == 0
    # the status line came once a second with rates
    lines = [ln for ln in out.getvalue().splitlines() if " step 1/1 " in ln]
    assert len(lines) >= 8 and "received" in lines[-1]


def test_interrupt_flushes_samples_and_marks_run_interrupted(spark, amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    w = workload_from_dict(workload_dict(amqp_url, unique_name, driver=DRIVER, rate=200, duration=60))
    timer = threading.Timer(6.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    started = time.monotonic()
    try:
        result = run_workload(w, tmp_path, spark, out=io.StringIO())
    finally:
        timer.cancel()
    assert time.monotonic() - started < 40
    assert result.status == "interrupted"
    info = run_json(result.run_dir)
    assert info["status"] == "interrupted" and info["ended_at"]
    published = read(result.run_dir, "published")
    assert 0 < published.num_rows < 2 * 200 * 60
    markers = list(result.run_dir.glob("*/local/task-*/attempt-*/_COMMITTED"))
    assert len(markers) == 4 and all(json.loads(m.read_text())["interrupted"] for m in markers)


def test_cli_broker_down_is_one_line_within_seconds(tmp_path: Path, unique_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(workload_dict("amqp://guest:hunter2@127.0.0.1:5679/", unique_name)))
    started = time.monotonic()
    assert main(["run", str(f), "--out", str(tmp_path)]) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot connect" in err and "5679" in err
    assert "hunter2" not in err and "Traceback" not in err


def test_more_tasks_than_slots_is_a_clear_error(spark, amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    data = workload_dict(amqp_url, unique_name, tasks=3)
    data["queues"] = {"pattern": f"{unique_name}-%d", "from": 1, "to": 3, "durable": False, "auto_delete": True}
    w = workload_from_dict(data)
    from rbench.errors import ConfigError
    with pytest.raises(ConfigError, match="needs 3 Spark task slots .* offers 2"):
        run_workload(w, tmp_path, spark, out=io.StringIO())


def test_summary_and_report_give_the_same_rates_on_a_saturated_step(spark, amqp_url: str, unique_name: str,
                                                                     tmp_path: Path) -> None:
    """A rate far above what one producer can send: intended and sent times part (the schedule runs ahead
    of the sends), which is where a summary counting by intended time and a report counting by send time
    disagreed. Both now print the reduce's figures."""
    import csv

    from rbench.coordinator.summary import print_summary

    w = workload_from_dict(workload_dict(amqp_url, unique_name, driver=DRIVER, producers=1, consumers=1, rate=1_000_000,
                                         duration=4, warmup=1, queues={"pattern": f"{unique_name}-%d", "from": 1, "to": 1},
                                         publisher={"confirm": True, "confirm_window": 8}))
    result = run_workload(w, tmp_path, spark, out=io.StringIO())
    reduced = reduce_runs([result.run_dir], session=spark)
    published = read(result.run_dir, "published")
    (row,) = reduced.steps
    t_int = published["t_intended"].to_numpy()
    by_intended = ((t_int >= row["meas_start_ns"]) & (t_int < row["end_ns"])).sum()
    assert row["published_in_window"] > 2 * by_intended + 100        # saturated: the two clocks really part
    out = io.StringIO()
    print_summary(result.run_dir, reduced, out=out)
    (line,) = [ln for ln in out.getvalue().splitlines() if ln.startswith("local ")]
    shown = [float(v.replace(",", "")) for v in line.split()[3:6]]
    with open(reduced.out_dir / "steps.csv") as f:
        (csv_row,) = list(csv.DictReader(f))
    expected = [float(csv_row[k]) for k in ("publish_rate", "confirm_rate", "consume_rate")]
    assert shown == [round(v) for v in expected]
