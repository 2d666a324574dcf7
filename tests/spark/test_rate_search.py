"""A rate search on the real broker: a consumer that cannot exceed ~1,000 msg/s bounds the answer."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbench.cli import main
from tests.runhelpers import workload_dict


def test_rate_search_brackets_the_consumers_limit(spark, amqp_url: str, unique_name: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    w = workload_dict(amqp_url, unique_name, driver="amqp091", producers=1, consumers=1, rate=None, duration=None,
                      queues={"pattern": f"{unique_name}-%d", "from": 1, "to": 1, "durable": False, "auto_delete": False},
                      consumer={"prefetch": 1, "multi_ack_every": 1, "processing_delay": "1ms"},
                      rate_search={"start": 250, "max": 16_000, "step": 2, "precision": 0.25,
                                   "slo": {"p99": "500ms", "consume_ratio": 0.95}})
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(w))
    assert main(["run", str(f), "--out", str(tmp_path / "out"), "--master", "local[2]", "--quiet"]) == 0
    out = capsys.readouterr().out
    (folder,) = [p for p in (tmp_path / "out").iterdir() if p.name.endswith("-search")]
    (cluster,) = json.loads((folder / "search.json").read_text())["clusters"]
    lo, hi = cluster["highest_pass"], cluster["first_fail"]
    # 1 ms per message, one at a time: the consumer cannot take 1,000 msg/s, and 250 msg/s is easy
    assert lo is not None and hi is not None and 250 <= lo < hi <= 1_000, cluster
    if cluster["ended_by"].startswith("stopped:"):    # a loaded machine's generator fell behind: said, not hidden
        assert cluster["probes"][-1]["generator"] and "load generator" in out, cluster
    else:
        assert (hi - lo) / lo <= 0.25 and cluster["ended_by"] == "bracket within the precision", cluster
    probes = cluster["probes"]
    assert [p["passed"] for p in probes if p["target"] <= lo] == [True] * sum(p["target"] <= lo for p in probes)
    assert "highest rate that met the SLO" in out
    # every probe is a step of the report, and the leaderboard's highest matched target is the answer
    board = json.loads((folder / "report" / "leaderboard.json").read_text())["leaderboard"]
    (best,) = board["highest_matched"]
    assert best["target_rate"] == pytest.approx(lo)
    assert len(list((folder / "report").glob("steps.csv"))) == 1
    steps = (folder / "report" / "steps.csv").read_text().splitlines()
    assert len(steps) - 1 == len(probes)


def test_perftest_rate_search_runs_the_workloads_search(spark, amqp_url: str, unique_name: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`rbench perftest --rate-search` maps onto rate_search and runs through `rbench run`'s search and reduce."""
    # 6 ms per message, one at a time: the consumer cannot take 200 msg/s, 100 msg/s is easy
    argv = ["perftest", "-h", amqp_url, "-u", unique_name, "-x", "1", "-y", "1", "-q", "1", "-L", "6000", "-c", "64",
            "--rate-search", "100:200", "--search-step", "2s", "--slo-p99", "1s", "--slo-consume-ratio", "95%",
            "--search-max-probes", "2", "--cluster-name", "local", "--out", str(tmp_path), "--master", "local[2]",
            "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    (folder,) = [p for p in tmp_path.iterdir() if p.name.endswith("-search")]
    doc = json.loads((folder / "search.json").read_text())
    assert doc["rate_search"] == {"start": 100.0, "max": 200.0, "step": 2.0, "precision": 0.05, "max_probes": 2,
                                  "slo": {"p99": 1.0, "consume_ratio": 0.95}}
    (cluster,) = doc["clusters"]
    probes = cluster["probes"]
    assert probes[0]["target"] == 100 and probes[0]["passed"], probes
    if cluster["ended_by"].startswith("stopped:"):        # this machine's generator was the limit: said, not hidden
        assert probes[-1]["generator"] and "load generator" in out
    else:
        assert [p["target"] for p in probes] == [100, 200] and not probes[1]["passed"], probes
        assert (cluster["highest_pass"], cluster["first_fail"]) == (100, 200)
    assert "rate search (" in out and "local: highest rate that met the SLO 100 msg/s" in out
    # the report: every probe a step, the verdict first and the probes drawn
    report = folder / "report"
    assert len((report / "steps.csv").read_text().splitlines()) - 1 == len(probes)
    page = (report / "report.html").read_text()
    assert page.index("id='verdict'") < page.index("Rate search: the probes") < page.index("All steps")
    assert (report / "probes.png").stat().st_size > 0
    (verdict,) = json.loads((report / "leaderboard.json").read_text())["leaderboard"]["verdicts"]
    assert verdict["kind"] == "search" and verdict["highest_met"] == 100
