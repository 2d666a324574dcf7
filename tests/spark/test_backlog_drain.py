"""The backlog build-up and drain scenario (conf/workloads/backlog-drain-small.yaml) on the real broker,
and broker/ Parquet for every cluster of a normal run."""
from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from rbench.config.load import workload_from_dict
from rbench.config.types import ClusterTarget
from rbench.coordinator.run import run_workload
from rbench.reduce.job import reduce_runs
from rbench.samples.broker import read_broker
from tests.runhelpers import read, run_json, workload_dict

ROOT = Path(__file__).resolve().parents[2]


def _delete_exchange(amqp_url: str, name: str) -> None:
    from rbench.drivers.amqp091 import Amqp091Driver

    async def go() -> None:
        d = Amqp091Driver()
        await d.open(ClusterTarget(name="local", uris=(amqp_url,)))
        try:
            await d.delete_exchange(name)
        finally:
            await d.aclose()
    asyncio.run(go())


def test_small_backlog_builds_drains_and_every_copy_arrives(spark: Any, amqp_url: str, unique_name: str,
                                                           tmp_path: Path) -> None:
    spec = yaml.safe_load((ROOT / "conf" / "workloads" / "backlog-drain-small.yaml").read_text())
    spec["clusters"][0]["uris"] = [amqp_url]
    spec["queues"]["pattern"] = f"{unique_name}-%d"       # deleted after the session (TEST_PREFIX)
    spec["exchange"]["name"] = unique_name
    w = workload_from_dict(spec)
    out = io.StringIO()
    try:
        result = run_workload(w, tmp_path, spark, out=out, progress=False)
    finally:
        _delete_exchange(amqp_url, unique_name)
    assert result.status == "complete"
    printed = out.getvalue()
    assert "consumers paused" in printed and "consumers resumed" in printed and "warning" not in printed
    cluster = run_json(result.run_dir)["clusters"][0]
    assert [p["phase"] for p in cluster["pause"]["phases"]] == ["steady", "build-up", "drain"]
    assert cluster["broker_metrics"]["sources"] == ["management", "prometheus", "amqp"]
    samples = read_broker(result.run_dir, "local")
    per_queue = {(s, q) for s, q in zip(samples["source"].to_pylist(), samples["queue"].to_pylist()) if q is not None}
    assert {q for s, q in per_queue if s == "management"} == {f"{unique_name}-{i}" for i in (1, 2, 3)}
    assert cluster["pause"]["phases"][2]["backlog"] >= 1350            # resumed on the broker's depth

    res = reduce_runs([result.run_dir], session=spark)
    (step,) = res.steps
    assert step["published"] > 0.95 * read(result.run_dir, "published").num_rows
    assert step["expected"] == 3 * step["published"]                  # fan-out: one copy per bound queue
    assert step["lost"] == 0 and step["duplicated"] == 0 and step["consumed_unique"] == step["expected"], res.phases
    assert step["broker_cpu_us_per_msg"] > 0 and step["broker_mem_peak_mb"] > 0

    phases = {p["phase"]: p for p in res.phases}
    build, drain = phases["build-up"], phases["drain"]
    assert build["peak_backlog"] >= 1350 and build["buildup_rate"] > 0 and build["buildup_rate_client"] > 0
    # the client's own count says when the queues drained; the broker's depth samples agree within one interval
    assert drain["drain_s"] is not None and drain["drain_s_client"] is not None
    assert abs(drain["drain_s"] - drain["drain_s_client"]) <= w.broker_metrics.interval
    assert drain["drain_consume_rate"] > w.rate * 3                    # faster than they arrive: the backlog shrinks
    assert drain["e2e_p99_ms"] > phases["steady"]["e2e_p50_ms"]

    # the report shows depth, memory and CPU on the client's time axis
    broker = pq.read_table(res.out_dir / "broker_timeline.parquet").to_pylist()
    assert max(r["depth"] for r in broker if r["depth"] is not None) >= 1350
    assert all(r["memory_bytes"] for r in broker) and any(r["cpu_cores"] for r in broker)
    seconds = [r["second"] for r in broker]
    assert min(seconds) < 1 and max(seconds) > drain["start_s"]       # same axis as timeline.parquet (s since t0)
    html = (res.out_dir / "report.html").read_text()
    assert "The broker's side" in html and "Backlog phases" in html and (res.out_dir / "broker.png").is_file()
    assert (res.out_dir / "phases.csv").read_text().count("\n") == 4


def test_a_normal_run_samples_the_broker_of_every_cluster(spark: Any, amqp_url: str, unique_name: str,
                                                          tmp_path: Path) -> None:
    spec = workload_dict(amqp_url, unique_name, driver="amqp091", rate=100, duration=2, producers=1, consumers=1,
                         queues={"to": 1})
    spec["clusters"] = [{"name": "a", "uris": [amqp_url]}, {"name": "b", "uris": [amqp_url]}]
    result = run_workload(workload_from_dict(spec), tmp_path, spark, out=io.StringIO(), progress=False)
    assert result.status == "complete"
    for c in run_json(result.run_dir)["clusters"]:
        table = read_broker(result.run_dir, c["name"])
        assert table.num_rows and c["broker_metrics"]["samples"] >= 2 and not c["broker_metrics"]["unreachable"]
        assert set(table["cluster"].to_pylist()) == {c["name"]}
        t = table["t_ns"].to_pylist()
        assert min(t) <= c["t0_ns"] and max(t) >= c["load_end_ns"] - 1_500_000_000    # sampled while it ran
