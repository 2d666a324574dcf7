"""The reduce job against synthetic runs with known faults, checked with numpy on the same rows."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic_run import SynthCluster, SynthRun, SynthSpec, make_run

from rbench.errors import ConfigError, SinkError
from rbench.reduce.connections import MEM_COLUMNS
from rbench.samples.connections import CONNECT_COLUMNS

PCTS = [50, 75, 95, 99, 99.9]
NAMES = ["p50", "p75", "p95", "p99", "p999"]
M5L_3 = 3 * (0.096 * 730 + 100 * 0.08)        # 3 × m5.large + 100 GB gp3 (3000 IOPS included)


def expected_steps(run: SynthRun) -> dict[tuple[str, int], dict[str, Any]]:
    """Every per-step figure recomputed with numpy from the rows the generator kept."""
    P, C = run.published, run.consumed
    warm = run.run_json["warmup_s"]
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for cl in run.run_json["clusters"]:
        name = cl["name"]
        pc = P["cluster"] == name
        cc = C["cluster"] == name
        consumed_keys = set(zip(C["producer"][cc].tolist(), C["seq"][cc].tolist()))
        reordered_flag = _reordered(C, cc)
        for st in cl["steps"]:
            meas, end = st["start_ns"] + int(warm * 1e9), st["end_ns"]
            win = (end - meas) / 1e9
            pm = pc & (P["step"] == st["step"]) & (P["t_intended"] >= meas) & (P["t_intended"] < end)
            cm = cc & (C["step"] == st["step"]) & (C["t_intended"] >= meas) & (C["t_intended"] < end)
            e = {"target_rate": st["target_rate"], "window_s": win}
            e["publish_rate"] = (pc & (P["t_sent"] >= meas) & (P["t_sent"] < end)).sum() / win
            acked_in = pc & (P["outcome"] == "ack") & ~P["t_confirmed_null"] & (P["t_confirmed"] >= meas) & (P["t_confirmed"] < end)
            e["confirm_rate"] = acked_in.sum() / win
            e["consume_rate"] = (cc & (C["t_received"] >= meas) & (C["t_received"] < end)).sum() / win
            e["published"] = int(pm.sum())
            for oc, col in (("ack", "acked"), ("nack", "nacked"), ("returned", "returned"), ("timeout", "timeout"),
                            ("unconfirmed", "unconfirmed"), ("connection_lost", "connection_lost")):
                e[col] = int((pm & (P["outcome"] == oc)).sum())
            e["deliveries"] = int(cm.sum())
            e["redelivered"] = int(C["redelivered"][cm].sum())
            keys = C["producer"][cm].astype(np.int64) * 10**12 + C["seq"][cm]
            _, counts = np.unique(keys, return_counts=True)
            e["consumed_unique"] = int(counts.size)
            e["duplicated"] = int((counts > 1).sum())
            cand = pm & np.isin(P["outcome"], ["ack", "unconfirmed", "connection_lost"])
            e["lost"] = sum(1 for k in zip(P["producer"][cand].tolist(), P["seq"][cand].tolist()) if k not in consumed_keys)
            e["reordered"] = int(reordered_flag[cm].sum())
            lat = {"e2e": (C["t_received"] - C["t_intended"])[cm], "e2e_sent": (C["t_received"] - C["t_sent"])[cm],
                   "confirm": (P["t_confirmed"] - P["t_sent"])[pm & ~P["t_confirmed_null"]],
                   "send_lag": (P["t_sent"] - P["t_intended"])[pm]}
            for m, v in lat.items():
                if v.size:
                    for n, q in zip(NAMES, np.percentile(v, PCTS)):
                        e[f"{m}_{n}_ms"] = q / 1e6
                    e[f"{m}_max_ms"] = v.max() / 1e6
                else:
                    for n in [*NAMES, "max"]:
                        e[f"{m}_{n}_ms"] = None
            out[(name, st["step"])] = e
    return out


def _reordered(C: dict[str, np.ndarray], mask: np.ndarray) -> np.ndarray:
    """Per (producer, queue) in receive order (t_received, then seq): seq below an earlier seq."""
    flag = np.zeros(mask.size, dtype=bool)
    idx = np.flatnonzero(mask)
    for p in np.unique(C["producer"][idx]):
        for q in np.unique(C["queue"][idx]):
            sel = idx[(C["producer"][idx] == p) & (C["queue"][idx] == q)]
            if not sel.size:
                continue
            order = sel[np.lexsort((C["seq"][sel], C["t_received"][sel]))]
            seqs = C["seq"][order]
            prev_max = np.maximum.accumulate(np.concatenate([[-1], seqs[:-1]]))
            flag[order] = seqs < prev_max
    return flag


def matched(e: dict[str, Any], tol: float = 0.02, limit_ms: float = 1000.0) -> bool:
    return (e["target_rate"] is not None and e["e2e_p99_ms"] is not None
            and e["consume_rate"] >= (1 - tol) * e["target_rate"] and e["e2e_p99_ms"] <= limit_ms)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> SynthRun:
    return make_run(tmp_path_factory.mktemp("runs"), SynthSpec())


@pytest.fixture(scope="module")
def reduced(spark: Any, synth: SynthRun) -> Any:
    from rbench.reduce.job import reduce_runs

    return reduce_runs([synth.run_dir], session=spark)


def test_synthetic_run_has_every_fault(synth: SynthRun) -> None:
    exp = expected_steps(synth)
    for key in ("nacked", "returned", "timeout", "lost", "duplicated", "reordered"):
        assert sum(e[key] for e in exp.values()) > 0, key
    # the slow cluster saturates at the last step, the fast one does not
    assert not matched(exp[("slow", 2)]) and matched(exp[("fast", 2)]) and matched(exp[("slow", 1)])


def assert_steps_match(steps: list[dict[str, Any]], exp: dict[tuple[str, int], dict[str, Any]]) -> None:
    """Every figure of the reduce's per-step rows equals the numpy recomputation."""
    got = {(s["cluster"], s["step"]): s for s in steps}
    assert set(got) == set(exp)
    for key, e in exp.items():
        g = got[key]
        for col, want in e.items():
            if want is None:
                assert g[col] is None, (key, col)
            elif isinstance(want, (int, np.integer)) and not isinstance(want, bool):
                assert g[col] == want, (key, col, g[col], want)
            else:
                assert g[col] == pytest.approx(want, rel=1e-9, abs=1e-9), (key, col, g[col], want)
        assert g["matched"] == matched(e), key


def test_every_step_figure_matches_numpy(reduced: Any, synth: SynthRun) -> None:
    assert_steps_match(reduced.steps, expected_steps(synth))


def test_deliveries_that_came_again_are_duplicated_inside_the_windows_and_outside_them_otherwise(
        reduced: Any, synth: SynthRun) -> None:
    """Every copy of a message counts once in the whole-run figures: the copies of measured messages are in the
    steps' duplicated, the others (warm-up) in no step figure, and the summary line says which is which."""
    from rbench.reduce.rereads import cluster_line, split

    C, exp = synth.consumed, expected_steps(synth)
    for name in ("fast", "slow"):
        cc = C["cluster"] == name
        keys = np.array([f"{p}/{s}/{q}" for p, s, q in zip(C["producer"][cc], C["seq"][cc], C["queue"][cc])])
        _, counts = np.unique(keys, return_counts=True)
        (row,) = [c for c in reduced.clusters if c["cluster"] == name]
        assert row["run_deliveries"] == int(cc.sum()) and row["run_consumed_unique"] == counts.size
        assert row["run_duplicated"] == int((counts > 1).sum())
        assert row["run_redelivered"] == int(C["redelivered"][cc].sum())
        steps = [s for s in reduced.steps if s["cluster"] == name]
        again, measured, duplicated, flagged = split([row], steps)     # type: ignore[misc]
        assert again == int(cc.sum()) - counts.size
        assert measured == sum(e["deliveries"] - e["consumed_unique"] for (c, _), e in exp.items() if c == name)
        assert duplicated == sum(e["duplicated"] for (c, _), e in exp.items() if c == name)
        assert 0 < measured < again                    # the warm-up's copies are outside every window
        line = cluster_line(name, [row], steps)
        assert line is not None and f"delivered again: {again:,}" in line
        assert f"Of them {measured:,} of measured messages, counted in duplicated ({duplicated:,}" in line
        assert f"and {again - measured:,} of messages due outside every measurement window" in line
        assert any(line in n for n in reduced.notes)


def test_retried_and_uncommitted_attempts_are_ignored_and_reported(reduced: Any, synth: SynthRun) -> None:
    total = sum(s["published"] for s in reduced.steps)
    measured = sum(e["published"] for e in expected_steps(synth).values())
    assert total == measured                            # the 500-row decoy attempts would add nacks
    assert any("superseded attempt(s) [995]" in n for n in reduced.notes)
    assert any("uncommitted attempt(s) [1050]" in n for n in reduced.notes)


def test_leaderboards_and_costs_match_numpy(reduced: Any, synth: SynthRun) -> None:
    exp = expected_steps(synth)
    board = reduced.leaderboard
    for row in board["top_throughput"]:
        best = max((k for k in exp if k[0] == row["cluster"]), key=lambda k: exp[k]["consume_rate"])
        assert row["step"] == best[1]
        assert row["consume_rate"] == pytest.approx(exp[best]["consume_rate"])
    hm = {r["cluster"]: r for r in board["highest_matched"]}
    for cl in ("fast", "slow"):
        targets = [e["target_rate"] for k, e in exp.items() if k[0] == cl and matched(e)]
        assert hm[cl]["target_rate"] == max(targets)
    costs = {r["cluster"]: r for r in board["cost_at_top"]}
    for cl, r in costs.items():
        top = max(e["consume_rate"] for k, e in exp.items() if k[0] == cl)
        assert r["monthly_cost"] == pytest.approx(M5L_3)
        assert r["cost_per_1k_rate"] == pytest.approx(M5L_3 / (top / 1000))
    # default target: the highest every cluster matched (slow matched 400 msg/s, fast 800)
    assert board["target_rate"] == 400.0
    at = {r["cluster"]: r for r in board["cost_at_target"]}
    assert set(at) == {"fast", "slow"}
    assert at["slow"]["cost_per_1k_rate"] == pytest.approx(M5L_3 / 0.4)


def test_report_files_are_written_and_say_how(reduced: Any, synth: SynthRun) -> None:
    out = synth.run_dir / "report"
    assert reduced.out_dir == out
    for name in ("steps.parquet", "steps.csv", "leaderboard.md", "report.html", "throughput.png", "latency.png",
                 "confirm_latency.png", "latency_vs_throughput.png", "timeline.png", "timeline.parquet"):
        assert (out / name).stat().st_size > 0, name
    assert pq.read_table(out / "steps.parquet").num_rows == 6
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5 and "<img" in html and 'src="http' not in html
    # a run without faults: no fault figures, files, section or shading
    assert reduced.faults == [] and not (out / "faults.csv").exists() and not (out / "faults.json").exists()
    assert "Faults" not in html and not (out / "faults.png").exists()
    assert "warm-up" in html and "rank error 0" in html and "t_received - t_intended" in html
    md = (out / "leaderboard.md").read_text()
    assert "| 1 | fast |" in md and "Highest matched target" in md and "costs.yaml" in md
    tl = pq.read_table(out / "timeline.parquet").to_pylist()
    fast_consumed = sum(r["consumed"] for r in tl if r["cluster"] == "fast")
    assert fast_consumed == int((synth.consumed["cluster"] == "fast").sum())


def test_exact_percentiles_with_ties_negatives_and_singletons(spark: Any) -> None:
    from rbench.reduce.percentiles import exact_percentiles

    rng = np.random.default_rng(3)
    groups = {"a": rng.integers(-5_000, 5_000_000, 20_000), "b": np.repeat([7, 7, 7, 9], 50), "c": np.array([42])}
    rows = [(g, int(v)) for g, vs in groups.items() for v in vs]
    df = spark.createDataFrame(rows, "g string, v long")
    got = {r["g"]: r for r in exact_percentiles(df, ["g"], (0.0, 0.5, 0.99, 0.999, 1.0)).collect()}
    for g, vs in groups.items():
        want = np.percentile(vs, [0, 50, 99, 99.9, 100])
        assert [got[g][f"q{i}"] for i in range(5)] == pytest.approx(want, rel=1e-12)
        assert got[g]["n"] == vs.size and got[g]["vmax"] == vs.max()


def _tiny(root: Path, run_id: str, **kw: Any) -> SynthRun:
    spec = SynthSpec(run_id=run_id, clusters=kw.pop("clusters", [SynthCluster("c1", 1e9, instance_type="m5.xlarge")]),
                     rates=[50.0, 100.0], durations_s=[2.0, 2.0], producers=2, queues=1, tasks=1, warmup_s=0.5,
                     extra_attempts=False, **kw)
    return make_run(root, spec)


def test_several_runs_rank_together_and_other_workloads_are_refused(spark: Any, tmp_path: Path, synth: SynthRun) -> None:
    from rbench.reduce.job import reduce_runs

    other = _tiny(tmp_path, "run-b", workload_hash="0000other0000000")
    with pytest.raises(SinkError, match="different workloads.*--force"):
        reduce_runs([synth.run_dir, other.run_dir], session=spark, out=tmp_path / "both")
    with pytest.raises(ConfigError, match="--out"):
        reduce_runs([synth.run_dir, other.run_dir], session=spark)
    same = _tiny(tmp_path, "run-c", workload_hash=synth.spec.workload_hash)
    res = reduce_runs([synth.run_dir, same.run_dir], session=spark, out=tmp_path / "both", render=False)
    assert {r["cluster"] for r in res.leaderboard["top_throughput"]} == {"fast", "slow", "c1"}
    c1 = next(r for r in res.leaderboard["cost_at_top"] if r["cluster"] == "c1")
    assert c1["monthly_cost"] == pytest.approx(3 * (0.192 * 730 + 100 * 0.08))
    assert (tmp_path / "both" / "steps.parquet").is_file()


def _plant_stale(run: SynthRun, rows: list[tuple[int, int, int]]) -> None:
    """Add a committed consumed part of deliveries an earlier run left in the queue: (producer, seq, t_received)
    with stamps an hour before this run's t0, tagged step 0 as the recorder's clipping tags them."""
    import pyarrow as pa

    from rbench.runtime.recorder import CONSUMED_SCHEMA

    cl = run.run_json["clusters"][0]
    attempt = next((run.run_dir / "consumed" / cl["name"]).glob("task-00000/attempt-*"))
    n = len(rows)
    t_int = [cl["t0_ns"] - 3600 * 10**9 + i for i in range(n)]
    cols = {"run_id": [run.spec.run_id] * n, "cluster": [cl["name"]] * n, "step": [0] * n, "task": [0] * n,
            "consumer": [0] * n, "queue": ["q-0"] * n, "producer": [p for p, _, _ in rows], "seq": [q for _, q, _ in rows],
            "size": [run.spec.size] * n, "t_intended": t_int, "t_sent": [t + 100_000 for t in t_int],
            "t_received": [t for _, _, t in rows], "redelivered": [True] * n}
    marker = json.loads((attempt / "_COMMITTED").read_text())
    pq.write_table(pa.table(cols, schema=CONSUMED_SCHEMA), attempt / f"part-{marker['parts']:05d}.parquet")
    marker["parts"] += 1
    marker["rows"] += n
    (attempt / "_COMMITTED").write_text(json.dumps(marker))


def test_stale_deliveries_are_excluded_and_counted(spark: Any, tmp_path: Path) -> None:
    """Messages an earlier run left in the queue must not become reorders, hide losses, add to rates or latency."""
    from rbench.reduce.job import reduce_runs

    run = _tiny(tmp_path, "run-stale", p_lost=0.05)
    exp = expected_steps(run)
    P, C = run.published, run.consumed
    got_keys = set(zip(C["producer"].tolist(), C["seq"].tolist()))
    meas0, meas1 = (s["start_ns"] + int(run.spec.warmup_s * 1e9) for s in run.run_json["clusters"][0]["steps"])
    cand = np.flatnonzero((P["step"] == 1) & (P["outcome"] == "ack") & (P["t_intended"] >= meas1))
    lost = [(int(P["producer"][i]), int(P["seq"][i])) for i in cand if (P["producer"][i], P["seq"][i]) not in got_keys]
    assert lost                                   # a measured loss of step 2 that a stale copy would hide
    delivered = (int(C["producer"][0]), int(C["seq"][0]))
    stale = [(0, 100_000 + i, meas0 + 1_000_000 + i) for i in range(5)]     # high seqs first: every later one "reordered"
    stale += [(*lost[0], meas0 + 2_000_000), (*delivered, meas0 + 3_000_000)]   # would hide a loss / be a duplicate
    stale += [(1, 7, run.run_json["clusters"][0]["steps"][1]["end_ns"] - 1_000)]  # drained in step 2's window
    _plant_stale(run, stale)

    res = reduce_runs([run.run_dir], session=spark)

    assert_steps_match(res.steps, exp)            # every figure as if the stale rows were not there
    t0 = run.run_json["clusters"][0]["t0_ns"]
    (row,) = res.clusters
    assert {k: row[k] for k in ("run_id", "cluster", "t0_ns", "stale", "unroutable_dropped", "unroutable_returned")} == {
        "run_id": "run-stale", "cluster": "c1", "t0_ns": t0, "stale": len(stale),
        "unroutable_dropped": None, "unroutable_returned": None}                        # no broker samples: not 0
    assert row["run_deliveries"] == C["seq"].size                                     # the stale rows are not in it
    no_connect = {name: None for name in (*CONNECT_COLUMNS, *MEM_COLUMNS)}   # without connection figures: not 0
    assert {k: row[k] for k in no_connect} == no_connect
    note = next(n for n in res.notes if "stale" in n)
    assert "run-stale: cluster c1: 8 stale deliveries ignored" in note and "earlier run" in note
    saved = json.loads((res.out_dir / "leaderboard.json").read_text())
    assert saved["clusters"][0]["stale"] == 8 and note in saved["notes"]
    assert "stale = a delivery whose stamp (t_intended) predates" in saved["meta"]["stale_method"]
    header, line = (res.out_dir / "clusters.csv").read_text().splitlines()
    assert header == ('"run_id","cluster","t0_ns","stale","run_deliveries","run_consumed_unique","run_duplicated",'
                      '"run_redelivered","unroutable_dropped","unroutable_returned",'
                      + ",".join(f'"{name}"' for name in no_connect))
    assert line.startswith(f'"run-stale","c1",{t0},8,{C["seq"].size},') and line.endswith("," * (len(no_connect) + 2))
    html = (res.out_dir / "report.html").read_text()
    assert "What is missing or was skipped" in html and "8 stale deliveries ignored" in html
    assert "8 stale deliveries ignored" in (res.out_dir / "leaderboard.md").read_text()
    from rbench.commands.reduce import stale_line

    assert stale_line(res.clusters).endswith(": c1 8")
    tl = pq.read_table(res.out_dir / "timeline.parquet").to_pylist()
    assert sum(r["consumed"] for r in tl) == C["seq"].size
    assert max(r["e2e_max_ms"] for r in tl if r["e2e_max_ms"] is not None) < 60_000   # not an hour-old stamp


def test_printed_steps_count_from_one(reduced: Any, synth: SynthRun) -> None:
    """The first step is "step 1" in steps.csv, the report's table and the leaderboard (steps.parquet keeps 0)."""
    out = synth.run_dir / "report"
    assert sorted({r["step"] for r in pq.read_table(out / "steps.parquet").to_pylist()}) == [0, 1, 2]
    import pyarrow.csv as pacsv

    assert sorted(set(pacsv.read_csv(out / "steps.csv").column("step").to_pylist())) == [1, 2, 3]
    html = (out / "report.html").read_text()
    all_steps = html.split("<h2>All steps</h2>")[1]
    assert f"<tr><td>{synth.spec.run_id}</td><td>fast</td><td>1</td>" in all_steps
    assert "<td>fast</td><td>0</td>" not in all_steps
    top_fast = next(r for r in reduced.leaderboard["top_throughput"] if r["cluster"] == "fast")
    assert top_fast["step"] == 2                      # leaderboard.json: the 0-based index …
    md = (out / "leaderboard.md").read_text()
    assert any(line.startswith("| ") and "| fast | 3 |" in line for line in md.splitlines())   # … printed as step 3


def test_damaged_run_reports_what_is_missing(spark: Any, tmp_path: Path) -> None:
    from rbench.reduce.job import reduce_runs

    run = _tiny(tmp_path, "run-damaged", status="interrupted")
    shutil.rmtree(run.run_dir / "consumed")
    meta = json.loads((run.run_dir / "run.json").read_text())
    last = meta["clusters"][0]["steps"][-1]
    meta["clusters"][0]["steps"].append({"step": 2, "rate_per_producer": 200, "target_rate": 400, "duration_s": 2,
                                         "start_ns": last["end_ns"], "end_ns": last["end_ns"] + 2 * 10**9})
    (run.run_dir / "run.json").write_text(json.dumps(meta))
    res = reduce_runs([run.run_dir], session=spark)
    text = "\n".join(res.notes)
    assert "status is 'interrupted'" in text
    assert "no consumed samples at all" in text
    assert "step 3: no messages in the measurement window" in text      # the third step, printed from 1
    assert "none consumed" in text
    assert res.leaderboard["highest_matched"] == []
    assert "no consumed samples at all" in (res.out_dir / "leaderboard.md").read_text()
    assert (res.out_dir / "report.html").is_file()


def test_bad_input_is_one_line(spark: Any, tmp_path: Path) -> None:
    from rbench.cli import main

    assert main(["reduce", str(tmp_path / "nope")]) == 2
    (tmp_path / "empty").mkdir()
    with pytest.raises(SinkError, match="no run.json"):
        from rbench.reduce.job import reduce_runs
        reduce_runs([tmp_path / "empty"], session=spark)
    run = _tiny(tmp_path, "run-corrupt")
    part = next((run.run_dir / "published").rglob("part-00000.parquet"))
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    with pytest.raises(SinkError, match="corrupt Parquet file") as err:
        reduce_runs([run.run_dir], session=spark)
    assert str(part) in str(err.value) and "\n" not in str(err.value)
    bare = _tiny(tmp_path, "run-bare")
    shutil.rmtree(bare.run_dir / "published")
    shutil.rmtree(bare.run_dir / "consumed")
    with pytest.raises(SinkError, match="no committed Parquet samples"):
        reduce_runs([bare.run_dir], session=spark)
    (bare.run_dir / "run.json").write_text("{not json")
    with pytest.raises(SinkError, match="unreadable run.json"):
        reduce_runs([bare.run_dir], session=spark)


def test_report_command_rerenders_without_spark(reduced: Any, synth: SynthRun, tmp_path: Path) -> None:
    from rbench.cli import main

    out = synth.run_dir / "report"
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5
    assert main(["report", str(tmp_path)]) == 2          # not a reduce output: one line, no traceback


def test_report_command_takes_the_run_directory(reduced: Any, synth: SynthRun, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """issue 11: `rbench report RUN_DIR` failed (it wanted RUN_DIR/report and did not say so)."""
    from rbench.cli import main

    (synth.run_dir / "report" / "report.html").unlink()
    assert main(["report", str(synth.run_dir)]) == 0
    assert capsys.readouterr().out.strip() == f"report: {synth.run_dir / 'report' / 'report.html'}"
    unreduced = tmp_path / "run"
    unreduced.mkdir()
    (unreduced / "run.json").write_text("{}")
    assert main(["report", str(unreduced)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"run `rbench reduce {unreduced}` first"), err
