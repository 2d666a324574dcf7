"""Every run shape prints rates that are messages ÷ the time the load really ran, and a broker that kept up is "met".

Full, interrupted mid-step, interrupted before any load, message count (-C), time limit, producers'
start delays and unlimited rate: each run goes through the real coordinator, broker (RabbitMQ 3.10
and 4.0) and reduce, and the printed per-step rate is checked against the Parquet rows counted over
the step's measurement window in run.json (rbench.samples.windows).
"""
from __future__ import annotations

import io
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rbench.config.load import workload_from_dict
from rbench.coordinator.run import run_workload
from rbench.coordinator.summary import print_summary
from rbench.reduce.job import reduce_runs
from tests.brokers import Broker
from tests.runhelpers import read, run_json, workload_dict


def _one_queue(amqp_url: str, name: str, **overrides: Any) -> dict[str, Any]:
    return workload_dict(amqp_url, name, driver="amqp091", producers=1, consumers=1,
                         queues={"pattern": f"{name}-%d", "from": 1, "to": 1}, **overrides)


def _printed_rows(out: str) -> dict[int, list[float]]:
    """step → [sent/s, conf/s, recv/s] from the summary's table (cluster 'local')."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 6 and parts[0] == "local" and parts[1].isdigit():
            rows[int(parts[1])] = [float(v.replace(",", "")) if v != "-" else float("nan") for v in parts[3:6]]
    return rows


def _check_rates_against_parquet(run_dir: Path, reduced: Any) -> dict[int, list[float]]:
    """Printed sent/s and recv/s = rows whose t_sent / t_received fall in the real window ÷ its length."""
    out = io.StringIO()
    print_summary(run_dir, reduced, out=out)
    printed = _printed_rows(out.getvalue())
    info = run_json(run_dir)
    pub, con = read(run_dir, "published"), read(run_dir, "consumed")
    sent, received = pub["t_sent"].to_numpy(), con["t_received"].to_numpy()
    for s in info["clusters"][0]["steps"]:
        if s["status"] == "not run":
            assert s["step"] + 1 not in printed
            continue
        lo, hi = s["measure_start_ns"], s["measure_end_ns"]
        assert s["start_ns"] + int(info["warmup_s"] * 1e9) <= lo < hi <= s["end_ns"]
        seconds = (hi - lo) / 1e9
        want_sent = ((sent >= lo) & (sent < hi)).sum() / seconds
        want_recv = ((received >= lo) & (received < hi)).sum() / seconds
        got = printed[s["step"] + 1]
        assert got[0] == pytest.approx(round(want_sent), abs=1) and got[2] == pytest.approx(round(want_recv), abs=1)
    return printed


def _after_t0(run_dir_parent: Path, delay_s: float, sig: int = signal.SIGTERM) -> threading.Thread:
    """Send ``sig`` to ourselves ``delay_s`` after the run's t0 appears in run.json (load started)."""
    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for f in run_dir_parent.glob("*/run.json"):
                try:
                    t0 = run_json(f.parent)["clusters"][0].get("t0_ns")
                except (ValueError, OSError):
                    t0 = None
                if t0:
                    time.sleep(max(0.0, (t0 - time.time_ns()) / 1e9 + delay_s))
                    os.kill(os.getpid(), sig)
                    return
            time.sleep(0.05)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _verdict(reduced: Any) -> dict[str, Any]:
    (v,) = reduced.leaderboard["verdicts"]
    return dict(v)


def test_full_run_of_two_steps(spark, broker: Broker, unique_name: str, tmp_path: Path) -> None:
    amqp_url = broker.amqp_url
    w = workload_from_dict(_one_queue(amqp_url, unique_name, rate=None, duration=None,
                                      rate_steps=[{"rate": 300, "duration": 2}, {"rate": 600, "duration": 2}],
                                      publisher={"random_start_delay": 0.5}))
    result = run_workload(w, tmp_path, spark, out=io.StringIO())
    steps = run_json(result.run_dir)["clusters"][0]["steps"]
    assert [s["status"] for s in steps] == ["complete", "complete"]
    # the start delay shortens the first step's window only
    assert steps[0]["measure_start_ns"] > steps[0]["start_ns"] and steps[1]["measure_start_ns"] == steps[1]["start_ns"]
    reduced = reduce_runs([result.run_dir], session=spark, render=False)
    printed = _check_rates_against_parquet(result.run_dir, reduced)
    # the generator self-check ran on every step and reached the reduce (whether a step is flagged
    # depends on the machine's load: tests/broker/test_selfcheck.py checks the verdicts)
    (task,) = run_json(result.run_dir)["clusters"][0]["task_results"]
    assert sorted(task["self_check"]) == ["0", "1"]
    assert all(0 <= f["cpu"] < 2 and f["seconds"] > 1 for f in task["self_check"].values())
    assert all(isinstance(r["generator_bound"], bool) for r in reduced.steps)
    # the generator keeps its schedule on an idle machine; a broker stalled by other load shows up as a
    # shortfall in the rates above (which must still equal rows ÷ window), so only a broad check here
    assert printed[1][0] == pytest.approx(300, rel=0.1) and printed[2][0] > 300


def test_interrupt_mid_step_cuts_that_step_and_leaves_later_ones_not_run(spark, amqp_url: str, unique_name: str,
                                                                         tmp_path: Path) -> None:
    # t0 is written to run.json only when the stage ends, so the coordinator's status board is not visible
    # here: interrupt a fixed time after the run started instead, well inside the long second step
    w = workload_from_dict(_one_queue(amqp_url, unique_name, rate=None, duration=None,
                                      rate_steps=[{"rate": 200, "duration": 2}, {"rate": 400, "duration": 60},
                                                  {"rate": 800, "duration": 10}]))
    timer = threading.Timer(12.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        result = run_workload(w, tmp_path, spark, out=io.StringIO())
    finally:
        timer.cancel()
    info = run_json(result.run_dir)
    assert result.status == "interrupted"
    s1, s2, s3 = info["clusters"][0]["steps"]
    assert s1["status"] == "complete" and s2["status"] == "cut" and s3["status"] == "not run"
    assert s2["cut_by"] == "interrupt" and 1e9 < s2["end_ns"] - s2["start_ns"] < 59e9
    reduced = reduce_runs([result.run_dir], session=spark, render=False)
    printed = _check_rates_against_parquet(result.run_dir, reduced)
    # the cut step ran at its target for as long as it ran: not "400 msg/s × the fraction of 60 s"
    assert printed[2][0] == pytest.approx(400, rel=0.1)
    assert sorted(printed) == [1, 2]
    out = io.StringIO()
    print_summary(result.run_dir, reduced, out=out)
    assert "step 2: cut after" in out.getvalue() and "step 3: not run" in out.getvalue()


def test_interrupt_before_any_load_says_so(spark, amqp_url: str, unique_name: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from rbench.commands.run import run_and_report
    from rbench.coordinator.options import RunOptions

    w = workload_from_dict(_one_queue(amqp_url, unique_name, rate=100, duration=30))

    returned = threading.Event()

    def interrupt_when_run_json_appears() -> None:
        # only ever signal a run that is under way: a stray SIGINT would stop the whole test session
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not returned.is_set():
            if list(tmp_path.glob("*/run.json")):
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.01)

    threading.Thread(target=interrupt_when_run_json_appears, daemon=True).start()
    try:
        code = run_and_report(w, RunOptions(out=str(tmp_path), master="local[2]", quiet=True), "run")
    finally:
        returned.set()
    assert code == 130
    err = capsys.readouterr().err
    assert "interrupted before any load was sent: nothing was measured" in err
    assert "Traceback" not in err and "no committed Parquet" not in err
    (run_dir,) = [p.parent for p in tmp_path.glob("*/run.json")]
    assert run_json(run_dir)["status"] == "interrupted"


def test_message_count_run_is_measured_over_the_time_it_took(spark, broker: Broker, unique_name: str,
                                                             tmp_path: Path) -> None:
    w = workload_from_dict(_one_queue(broker.amqp_url, unique_name, rate=250, duration=None,
                                      publisher={"message_count": 500}))
    result = run_workload(w, tmp_path, spark, out=io.StringIO())
    (step,) = run_json(result.run_dir)["clusters"][0]["steps"]
    assert step["status"] == "cut" and step["cut_by"] == "message count reached"
    assert 1.5e9 < step["end_ns"] - step["start_ns"] < 3e9          # 500 at 250 msg/s, not a one-year window
    reduced = reduce_runs([result.run_dir], session=spark, render=False)
    printed = _check_rates_against_parquet(result.run_dir, reduced)
    assert printed[1][0] == pytest.approx(250, rel=0.1)
    out = io.StringIO()
    print_summary(result.run_dir, reduced, out=out)
    ran = (step["end_ns"] - step["start_ns"]) / 1e9
    assert f"step 1: ran {ran:.1f} s, until every producer had sent its message count" in out.getvalue()
    assert "3.1536e+07" not in out.getvalue()


@pytest.mark.parametrize("shape", ["count", "time"])
def test_producers_start_delay_is_not_counted_against_the_broker(spark, broker: Broker, unique_name: str,
                                                                 tmp_path: Path, shape: str) -> None:
    """PerfTest's random producer start delay (up to 1 s when a rate is given): the rate is the target's, not
    the target × (run − delay) ÷ run, and the verdict of a broker that kept up is "met" (issue 27's seed-004 run
    reported 2,386 of 2,500 msg/s and "No cluster met the SLO")."""
    rate, producers = 150, 2
    shape_args: dict[str, Any] = ({"duration": None, "publisher": {"message_count": 450, "random_start_delay": 1.0}}
                                  if shape == "count" else {"duration": 4, "publisher": {"random_start_delay": 1.0}})
    w = workload_from_dict(workload_dict(broker.amqp_url, unique_name, driver="amqp091", producers=producers,
                                         consumers=1, rate=rate, queues={"pattern": f"{unique_name}-%d", "from": 1, "to": 1},
                                         **shape_args))
    result = run_workload(w, tmp_path, spark, out=io.StringIO())
    (step,) = run_json(result.run_dir)["clusters"][0]["steps"]
    (task,) = run_json(result.run_dir)["clusters"][0]["task_results"]
    # the window starts at the last producer's first due send, inside the 1 s the delays may take
    assert step["measure_start_ns"] == task["producers_due_ns"]
    assert step["start_ns"] <= step["measure_start_ns"] < step["start_ns"] + 1_000_000_000
    if shape == "count":      # … and ends when the first producer had sent its 450
        assert step["measure_end_ns"] == task["producers_first_stop_ns"] < step["end_ns"]
    else:
        assert step["measure_end_ns"] == step["end_ns"]
    assert "measure_note" in step and "first due send" in step["measure_note"]
    reduced = reduce_runs([result.run_dir], session=spark, render=False)
    printed = _check_rates_against_parquet(result.run_dir, reduced)
    assert printed[1][0] == pytest.approx(rate * producers, rel=0.05)
    (row,) = reduced.steps
    why = {k: row[k] for k in ("consume_rate", "publish_rate", "e2e_p99_ms", "generator_bound", "window_s")}
    assert row["consume_rate"] >= 0.97 * rate * producers, why      # the judged rate is the target's, delay or not
    if row["e2e_p99_ms"] <= 1000:         # a machine too loaded to keep the latency SLO is not what this checks
        assert row["matched"] and _verdict(reduced)["status"] == "not_reached", why    # met: capacity above it


def test_unlimited_rate_is_counted_by_send_time(spark, broker: Broker, unique_name: str, tmp_path: Path) -> None:
    amqp_url = broker.amqp_url
    w = workload_from_dict(_one_queue(amqp_url, unique_name, rate=None, duration=2))
    result = run_workload(w, tmp_path, spark, out=io.StringIO())
    printed = _check_rates_against_parquet(result.run_dir, reduce_runs([result.run_dir], session=spark, render=False))
    published = read(result.run_dir, "published")
    assert printed[1][0] > 500 and published.num_rows == pytest.approx(printed[1][0] * 2, rel=0.2)
    assert np.all(published["t_sent"].to_numpy() == published["t_intended"].to_numpy())
