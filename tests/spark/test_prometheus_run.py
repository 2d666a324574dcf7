"""A real run on Spark scraped by a real Prometheus; the dashboard's queries against it; the history.

One short run (module fixture) is scraped every second through the coordinator's merged
/metrics (rbench.live.run_metrics) by Debian's prometheus binary, next to RabbitMQ's own endpoint,
and reduced once. The dashboard's whole-step p99 must land within one histogram bucket of the
reduce's exact p99; its counters must equal the Parquet row counts; every panel's PromQL must
pass promtool and run. The same reduce, appended twice to a history, is a trend of two nights.
"""
from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rbench.config.load import workload_from_dict
from rbench.coordinator.run import run_workload
from rbench.live import dashboard
from rbench.live.control.wire import Progress
from rbench.live.run_metrics import BUCKET_RATIO, RunMetrics
from tests.conftest import TEST_PREFIX
from tests.promserver import Prometheus, free_port, wait_http
from tests.runhelpers import workload_dict

RABBIT_PROMETHEUS = "127.0.0.1:15692"


@pytest.fixture(scope="module")
def scraped(spark: Any, amqp_url: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("prom")
    port = free_port()
    prom = Prometheus(tmp / "prometheus", {"rbench": [f"127.0.0.1:{port}"], "rabbitmq": [RABBIT_PROMETHEUS]})
    try:
        # Prometheus hands its targets to the scrape loop only after service discovery has settled (seconds):
        # a run started before that had its first scrape at its sixth second (seen in a fresh-clone run), too
        # late for any rate over the run. The run starts once RabbitMQ's endpoint has been scraped.
        prom.wait_scraped(f"http://{RABBIT_PROMETHEUS}/metrics")
        name = f"{TEST_PREFIX}prom-{uuid.uuid4().hex[:8]}"
        w = workload_from_dict(workload_dict(amqp_url, name, producers=2, consumers=2, rate=500, duration=6))
        out = io.StringIO()
        result = run_workload(w, tmp / "results", spark, out=out, metrics_port=port, metrics_linger_s=2.5)
        assert result.status == "complete", out.getvalue()
        # the real command: reduce, then append to a history (the session above is reused: getOrCreate)
        history = tmp / "history"
        from rbench.cli import main
        assert main(["reduce", str(result.run_dir), "--history", str(history), "--commit", "abc123"]) == 0
        reduced = pq.read_table(result.run_dir / "report" / "steps.parquet").to_pylist()
        yield prom, result, reduced, history, out.getvalue()
    finally:
        prom.stop()


def _step_row(reduced: Any) -> dict[str, Any]:
    (row,) = [s for s in reduced if s["cluster"] == "local" and s["step"] == 0]
    return row


def test_dashboard_p99_lands_within_one_bucket_of_the_exact_p99(scraped: Any) -> None:
    prom, result, reduced, _, out = scraped
    assert "run metrics (all tasks merged): http://" in out
    run_id = result.run_dir.name
    exact = _step_row(reduced)
    table = next(p for p in dashboard.PANELS if p.kind == "table")
    for query, pct in zip(table.queries, ("p50", "p95", "p99")):
        expr = dashboard.substitute(query.expr, range_="10m", run=run_id, cluster="local", step="0")
        (sample,) = prom.query(expr)
        assert sample["metric"] == {"cluster": "local", "step": "0"}
        live_s = float(sample["value"][1])
        exact_s = exact[f"e2e_{pct}_ms"] / 1000.0
        # within one exported bucket: a factor BUCKET_RATIO (10 ** 0.1) either way
        assert abs(math.log(live_s / exact_s)) <= math.log(BUCKET_RATIO), (pct, live_s, exact_s)


def test_counters_equal_the_parquet_counts(scraped: Any) -> None:
    prom, result, reduced, _, _ = scraped
    run_id = result.run_dir.name
    tasks = json.loads((result.run_dir / "run.json").read_text())["clusters"][0]["task_results"]
    for key in ("published", "confirmed", "consumed", "nacked", "returned"):
        (sample,) = prom.query(f'sum(last_over_time(rbench_run_{key}_total{{run_id="{run_id}"}}[10m]))')
        expected = sum(r[key] for r in tasks)
        assert float(sample["value"][1]) == expected, key
    (count,) = prom.query(f'sum(last_over_time(rbench_run_latency_seconds_count{{run_id="{run_id}"}}[10m]))')
    assert float(count["value"][1]) == sum(r["consumed"] for r in tasks)


def test_every_panel_query_passes_promtool_and_runs(scraped: Any, tmp_path: Path) -> None:
    prom, result, _, _, _ = scraped
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr{i}", "expr": dashboard.substitute(e)} for i, e in enumerate(dashboard.expressions())]}]}
    f = tmp_path / "dashboard-rules.json"        # promtool reads YAML, and JSON is YAML
    f.write_text(json.dumps(rules))
    for path in (f, Path(dashboard.RULES_PATH)):
        check = subprocess.run([shutil.which("promtool") or "promtool", "check", "rules", str(path)],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout
    # every panel query runs on the real server; during the run each returns data
    t0_ns = json.loads((result.run_dir / "run.json").read_text())["clusters"][0]["t0_ns"]
    # at the end of the 6 s run, with rates over the 15 s before it: rbench's series start with the run and
    # RabbitMQ's before it (the fixture waited for its first scrape), so a slow scrape on a loaded machine
    # still leaves every rate its two samples
    during = t0_ns / 1e9 + 6.0
    for spec in dashboard.PANELS:
        for q in spec.queries:
            expr = dashboard.substitute(q.expr, rate_interval="15s", range_="10m", run=result.run_dir.name)
            if not prom.query(expr, at=during):
                scrapes = {s["metric"]["job"]: s["value"][1] for s in prom.query("sum by (job) (sum_over_time(up[15s]))", at=during)}
                raise AssertionError(f"{spec.title}: no data for {expr}; successful scrapes in the 15 s by job: {scrapes}")


def test_pushgateway_receives_the_final_merged_figures(tmp_path: Path) -> None:
    binary = shutil.which("prometheus-pushgateway")
    assert binary, "run `make prometheus` (scripts/ensure-prometheus.sh)"
    port = free_port()
    with (tmp_path / "pgw.log").open("wb") as log:
        proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_http(f"http://127.0.0.1:{port}/-/ready")
            m = RunMetrics("run-pgw-test")
            for task in range(3):
                m.add(Progress("c1", task, step=0, second=1, published=100, consumed=90, hist={100: 60, 120: 30},
                               e2e_sum_ns=90_000_000))
            m.push(f"http://127.0.0.1:{port}")
            RunMetrics("run-pgw-auth").push(f"http://user:secret@127.0.0.1:{port}")      # credentials: basic auth
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        finally:
            proc.terminate()
            proc.wait(10)
    assert 'rbench_run_info{' in text and 'run_id="run-pgw-auth"' in text
    lines = [ln for ln in text.splitlines() if 'run_id="run-pgw-test"' in ln]
    assert any(ln.startswith("rbench_run_published_total{") and ln.endswith(" 300") for ln in lines)
    assert any(ln.startswith("rbench_run_latency_seconds_count{") and ln.endswith(" 270") for ln in lines)
    from rbench.errors import RbenchError
    with pytest.raises(RbenchError, match=r"--pushgateway http://127.0.0.1:\d+/?: push failed"):
        RunMetrics("x").push(f"http://127.0.0.1:{free_port()}")


def test_real_reduce_appended_twice_is_a_trend_of_two_nights(scraped: Any, capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    from rbench.cli import main
    from rbench.history.store import read_steps

    _, result, reduced, hist, _ = scraped          # `rbench reduce --history` filed it under the run's own night
    first = json.loads((result.run_dir / "run.json").read_text())["started_at"][:10]
    assert main(["history", "add", str(result.run_dir), "--history", str(hist), "--night", "2031-01-02"]) == 0
    assert main(["history", "add", str(result.run_dir), "--history", str(hist), "--night", "2031-01-02"]) == 0  # replaces
    rows = read_steps(hist)
    assert sorted(str(n) for n in rows.column("night").to_pylist()) == [first, "2031-01-02"]
    assert rows.column("consume_rate").to_pylist() == [_step_row(reduced)["consume_rate"]] * 2
    assert sorted(rows.column("commit").to_pylist(), key=str) == [None, "abc123"]
    assert set(rows.column("workload_hash").to_pylist()) == {json.loads((result.run_dir / "run.json").read_text())["workload_hash"]}
    files = sorted(p.relative_to(hist).parent.as_posix() for p in hist.rglob("*.parquet"))
    assert files == [f"{kind}/workload=t/date={d}" for kind in ("leaderboard", "steps") for d in (first, "2031-01-02")]
    board = pq.read_table(next(hist.glob(f"leaderboard/workload=t/date={first}/*.parquet")))
    assert "top_throughput" in board.column("board").to_pylist()
    capsys.readouterr()
    plot = tmp_path / "trend.png"
    assert main(["history", "show", "--history", str(hist), "--metric", "consume_rate", "--plot", str(plot)]) == 0
    shown = capsys.readouterr().out
    assert shown.count(f"\n{first} ") + shown.count("\n2031-01-02 ") == 2 and plot.stat().st_size > 1000
