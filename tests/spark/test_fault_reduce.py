"""The fault figures of the reduce on a synthetic run whose every fault figure is known in advance
(tests/synthetic_run.make_fault_run documents what happens when)."""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic_run import FaultRun, S, make_fault_run

from rbench.reduce.metrics import TIMELINE_SCHEMA


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> FaultRun:
    return make_fault_run(tmp_path_factory.mktemp("faultruns"))


@pytest.fixture(scope="module")
def reduced(spark: Any, run: FaultRun) -> Any:
    from rbench.reduce.job import reduce_runs

    return reduce_runs([run.run_dir], session=spark)


def _fault(reduced: Any, cluster: str, index: int) -> dict[str, Any]:
    return next(f for f in reduced.faults if f["cluster"] == cluster and f["index"] == index)


def test_kill_with_restart(reduced: Any) -> None:
    f = _fault(reduced, "a", 0)
    assert (f["action"], f["node"], f["ok"], f["step"]) == ("kill", "rabbit-2", True, 0)
    assert (f["at_s"], f["end_s"], f["back_start_s"], f["back_s"]) == pytest.approx((10.25, 10.3, 20.0, 20.1))
    assert f["first_confirm_s"] == pytest.approx(0.37, abs=1e-9) and f["first_confirm_note"] is None
    assert (f["baseline_consume_rate"], f["baseline_seconds"]) == (200.0, 8)
    assert f["consume_back"] is True and f["consume_back_s"] == pytest.approx(3.75, abs=1e-9)
    assert f["consume_lowest_rate"] == 0.0 and f["recovery_note"] is None
    assert (f["window_start_s"], f["window_end_s"]) == pytest.approx((0.25, 30.1))
    assert {k: f[k] for k in ("lost", "connection_lost", "connection_lost_consumed", "duplicated", "reordered",
                              "redelivered")} == {"lost": 2, "connection_lost": 3, "connection_lost_consumed": 2,
                                                  "duplicated": 5, "reordered": 6, "redelivered": 5}
    # the warm-up's loss, duplicate and reorder are outside the window but in the whole run
    assert {k: f[f"run_{k}"] for k in ("lost", "connection_lost", "connection_lost_consumed", "duplicated", "reordered",
                                       "redelivered")} == {"lost": 3, "connection_lost": 3, "connection_lost_consumed": 2,
                                                           "duplicated": 6, "reordered": 7, "redelivered": 6}
    assert (f["reconnects"], f["reconnects_not_back"], f["in_flight_reported"], f["skipped"]) == (2, 0, 3, 150)
    assert f["reconnect_max_s"] == pytest.approx(3.898) and f["run_reconnect_max_s"] == pytest.approx(3.898)


def test_second_fault_of_the_cluster(reduced: Any) -> None:
    f = _fault(reduced, "a", 1)
    assert f["back_s"] is None and f["back_start_s"] is None
    assert f["first_confirm_s"] == pytest.approx(0.0021, abs=1e-9)
    # seconds 10-16 (fault 1 through its recovery run, with the catch-up burst) are out of the mean
    assert (f["baseline_consume_rate"], f["baseline_seconds"]) == (3205 / 16, 16)
    assert f["consume_back"] is True and f["consume_back_s"] == pytest.approx(0.5) and f["consume_lowest_rate"] == 200.0
    assert (f["window_start_s"], f["window_end_s"]) == pytest.approx((15.5, 40.0))   # never back: load end + 10 s
    assert (f["lost"], f["connection_lost"], f["duplicated"], f["reordered"], f["redelivered"]) == (2, 0, 5, 6, 5)
    assert (f["reconnects"], f["reconnect_max_s"]) == (0, None)


def test_fault_in_warm_up_without_confirms(reduced: Any) -> None:
    f = _fault(reduced, "b", 0)
    assert f["first_confirm_s"] is None and "no ack confirm in the whole run" in f["first_confirm_note"]
    assert f["baseline_consume_rate"] is None and f["consume_back"] is None and f["consume_back_s"] is None
    assert "warm-up" in f["recovery_note"]
    assert (f["lost"], f["connection_lost"], f["duplicated"], f["reordered"], f["run_lost"]) == (0, 0, 0, 0, 0)
    assert (f["reconnects"], f["reconnect_max_s"], f["run_reconnect_max_s"]) == (0, None, None)


def test_series_are_the_per_second_counts(reduced: Any, run: FaultRun) -> None:
    P, C = run.published, run.consumed
    t0 = run.run_json["clusters"][0]["t0_ns"]
    a_pub, a_con = P["cluster"] == "a", C["cluster"] == "a"
    ack = a_pub & (P["outcome"] == "ack")
    want = {"published": np.bincount((P["t_sent"][a_pub] - t0) // S, minlength=31),
            "confirmed": np.bincount((P["t_confirmed"][ack] - t0) // S, minlength=31),
            "consumed": np.bincount((C["t_received"][a_con] - t0) // S, minlength=31)}
    series = _fault(reduced, "a", 0)["series"]
    assert [p["second"] for p in series] == list(range(30))   # window 0.25 s .. 30.1 s, cut at the last second with data
    for key, counts in want.items():
        assert [p[key] for p in series] == counts[:30].tolist(), key
    assert series[11]["t_s"] == pytest.approx(0.75)
    assert [p["consumed"] for p in series[10:17]] == [49, 0, 0, 0, 800, 200, 198]


def test_steps_keep_their_definitions(reduced: Any) -> None:
    a = next(s for s in reduced.steps if s["cluster"] == "a")
    assert (a["lost"], a["duplicated"], a["reordered"], a["redelivered"]) == (2, 5, 6, 5)
    b = next(s for s in reduced.steps if s["cluster"] == "b")
    assert (b["lost"], b["duplicated"], b["reordered"], b["unconfirmed"]) == (0, 0, 0, 1600)


def test_files_report_and_summary(reduced: Any, run: FaultRun, tmp_path: Path) -> None:
    out = reduced.out_dir
    rows = list(csv.DictReader((out / "faults.csv").open()))
    assert [(r["cluster"], r["fault"], r["step"]) for r in rows] == [("a", "1", "1"), ("a", "2", "1"), ("b", "1", "1")]
    assert rows[0]["lost"] == "2" and rows[0]["consume_back_s"] == "3.75"
    doc = json.loads((out / "faults.json").read_text())
    assert [f["index"] for f in doc["faults"]] == [0, 1, 0] and "consume_back_s" in doc["method"]
    assert pq.read_table(out / "timeline.parquet").schema.names == TIMELINE_SCHEMA.names
    html = (out / "report.html").read_text()
    assert html.count("<h2>Faults</h2>") == 1 and html.count("<h3>Fault ") == 3 and "kill rabbit-2 on cluster a" in html
    # throughput, latency against throughput (the knee), e2e and confirm latency per target, timeline, faults
    assert html.count("data:image/png;base64,") == 6 and (out / "faults.png").stat().st_size > 0
    assert "<td>first confirm after the fault (s)</td><td>0.370</td>" in html
    from rbench.coordinator.summary import print_summary

    text = io.StringIO()
    print_summary(run.run_dir, reduced, out=text)
    lines = [line for line in text.getvalue().splitlines() if ": fault " in line]
    assert lines == [
        "a: fault 1 kill rabbit-2 at 10.2 s (node back at 20.1 s): first confirm after 0.37 s, consume rate back after 3.8 s, "
        "lost 2, in flight at the cut 3 (2 consumed), duplicated 5, reordered 6, longest reconnect 3.90 s",
        "a: fault 2 stop rabbit-3 at 25.5 s (node not back during the run): first confirm after 2.1 ms, consume rate back "
        "after 0.5 s, lost 2, in flight at the cut 0 (0 consumed), duplicated 5, reordered 6",
        "b: fault 1 pause rabbit-3 at 1.0 s (node back at 1.5 s): no confirm after it, consume rate back: not measurable "
        "(the fault came during its step's warm-up: no measured second before it), lost 0, in flight at the cut 0 "
        "(0 consumed), duplicated 0, reordered 0"]
    from rbench.report.render import rerender

    (out / "report.html").unlink()
    rerender(out)
    assert (out / "report.html").read_text().count("<h3>Fault ") == 3
