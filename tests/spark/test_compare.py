"""`rbench compare` on the real brokers: A/A comparisons (a workload, the scalability sweep) show no difference,
and 3.10 against 4.0 writes its files.

The A/A test runs RabbitMQ 3.10 under two cluster names at a fixed 500 msg/s: whatever the machine's
noise, the consume rate's interval must contain 1 and its verdict say no difference. The 3.10/4.0
test checks the files and their shape, not which broker is faster (that is a measurement, not a
property). Load: 3 × 2 × 4 s + 2 × 2 × 3 s = 36 s, and 6 one-level sweeps (about 60 s on a loaded machine,
mostly Spark's 18 barrier stages).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rbench.cli import main
from rbench.compare.metrics import METRICS
from tests.brokers import RABBITMQ_3, RABBITMQ_4


def _workload(tmp_path: Path, name: str, clusters: list[dict[str, object]], duration: str, **extra: object) -> Path:
    doc = {"name": "cmp", "clusters": clusters, "producers": 1, "consumers": 1, "rate": 500, "duration": duration,
           "warmup": "1s", "drain_timeout": "3s",
           "queues": {"pattern": f"{name}-%d", "from": 1, "to": 1, "durable": False, "auto_delete": True},
           "publisher": {"confirm": True, "confirm_window": 64}, "consumer": {"prefetch": 100, "multi_ack_every": 10},
           **extra}
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def _folder(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.name.endswith("-cmp-compare")]
    return folder


def test_a_broker_compared_with_itself_shows_no_difference(spark, unique_name: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    RABBITMQ_3.require()
    clusters = [{"name": n, "uris": [RABBITMQ_3.amqp_url]} for n in ("a310", "b310")]
    f = _workload(tmp_path, unique_name, clusters, "4s")
    out = tmp_path / "out"
    code = main(["compare", str(f), "--rounds", "3", "--out", str(out), "--master", "local[2]", "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    folder = _folder(out)
    doc = json.loads((folder / "compare.json").read_text())
    assert (doc["a"], doc["b"]) == ("a310", "b310")
    assert [r["order"] for r in doc["rounds"]] == [["a310", "b310"], ["b310", "a310"], ["a310", "b310"]]
    consume = doc["metrics"]["consume_rate"]
    lo, hi = consume["ci"]
    assert lo <= 1.0 <= hi, consume
    assert consume["verdict"].startswith("no difference shown at 95 %"), consume
    assert len(consume["a"]) == len(consume["b"]) == 3 and all(400 < v < 600 for v in consume["a"] + consume["b"])
    # each round's run is an ordinary run directory inside the comparison's folder, with its Parquet and reduce
    runs = [Path(x["run_dir"]) for r in doc["rounds"] for x in r["runs"]]
    assert len(set(runs)) == 6 and all(p.parent == folder for p in runs)
    for p in runs:
        assert (p / "run.json").is_file() and list((p / "consumed").rglob("*.parquet"))
        assert (p / "report" / "steps.csv").is_file()
    assert "consume_rate" in printed.out and "no difference shown" in printed.out


def test_3_10_against_4_0_writes_the_comparison(spark, unique_name: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    RABBITMQ_3.require()
    RABBITMQ_4.require()
    own = {"management_urls": [RABBITMQ_4.management_url], "prometheus_urls": [RABBITMQ_4.prometheus_url]}
    clusters = [{"name": "rmq310", "uris": [RABBITMQ_3.amqp_url]},
                {"name": "rmq40", "uris": [RABBITMQ_4.amqp_url], "broker_metrics": own}]
    f = _workload(tmp_path, unique_name, clusters, "3s")
    out = tmp_path / "out"
    code = main(["compare", str(f), "--rounds", "2", "--out", str(out), "--master", "local[2]", "--quiet"])
    assert code == 0, capsys.readouterr().err
    folder = _folder(out)
    doc = json.loads((folder / "compare.json").read_text())
    assert set(doc["metrics"]) == {m.name for m in METRICS}
    assert "Student t interval" in doc["method"] and [p["b"] for p in doc["pairs"]] == ["rmq40"]
    assert isinstance(doc["notes"], list) and all("generator-bound" in n for n in doc["notes"])
    for name in ("consume_rate", "e2e_p50_ms", "e2e_p99_ms", "client_cpu_us_per_msg"):
        m = doc["metrics"][name]
        assert m["ratio"] > 0 and m["ci"][0] <= m["ratio"] <= m["ci"][1], (name, m)
        assert len(m["a"]) == len(m["b"]) == 2
        assert m["verdict"].startswith(("rmq40 ", "no difference shown")), m["verdict"]
    # each broker sampled on its own endpoints (4.0's named on its cluster): both sides have broker figures
    for name in ("broker_cpu_us_per_msg", "broker_mem_peak_mb"):
        assert None not in doc["metrics"][name]["a"] + doc["metrics"][name]["b"], doc["metrics"][name]
    md = (folder / "compare.md").read_text()
    assert "| consume_rate | msg/s |" in md and "rmq40 (B) against rmq310 (A)" in md
    page = (folder / "compare.html").read_text()
    assert page.count("<img") >= 4 and "consume_rate" in page
    assert (folder / "plots" / "rmq40-consume_rate.png").stat().st_size > 0


def test_a_sweep_compared_with_itself_shows_no_difference(spark, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`rbench compare --scalability`: RabbitMQ 3.10 swept under two names, one level (1 queue, 1 binding), 4 rounds
    (each side first twice, so a drift during the test cancels; with 3, one CI run saw b slower in every round).

    Every phase's interval (at 99 %: four phases, so a false difference here is at most 4 × 1 % likely under the
    method's model) must contain 1. Load: 8 sweeps of 3 barrier stages each, 20 messages per probe."""
    RABBITMQ_3.require()
    url = RABBITMQ_3.amqp_url
    out = tmp_path / "out"
    code = main(["compare", "--scalability", "--uri", f"a310={url}", "--uri", f"b310={url}", "-x", "1", "-y", "1",
                 "-n", "20", "--rounds", "4", "--confidence", "0.99", "--out", str(out), "--master", "local[2]",
                 "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    (folder,) = [p for p in out.iterdir() if p.name.endswith("-scalability-compare")]
    doc = json.loads((folder / "compare.json").read_text())
    assert (doc["a"], doc["b"], doc["mode"], doc["confidence"]) == ("a310", "b310", "scalability", 0.99)
    assert [r["order"] for r in doc["rounds"]] == [["a310", "b310"], ["b310", "a310"]] * 2
    assert set(doc["metrics"]) == {"create", "route", "baseline", "delete", "create@q1k1", "route@q1k1",
                                   "baseline@q1k1", "delete@q1k1"}
    for name, m in doc["metrics"].items():
        lo, hi = m["ci"]
        assert lo <= 1.0 <= hi and m["verdict"].startswith("no difference shown at 99 %"), (name, m)
        assert len(m["a"]) == len(m["b"]) == 4 and all(v > 0 for v in m["a"] + m["b"]), (name, m)
    assert doc["metrics"]["create@q1k1"]["queues"] == 1 and doc["metrics"]["route@q1k1"]["bindings"] == 1
    # each side of a round is a whole sweep with its own run directory and report, inside the comparison's folder
    runs = [Path(x["run_dir"]) for r in doc["rounds"] for x in r["runs"]]
    assert len(set(runs)) == 8 and all(p.parent == folder for p in runs)
    for p in runs:
        assert (p / "scalability.parquet").is_file() and json.loads((p / "sweep.json").read_text())["status"] == "complete"
    md = (folder / "compare.md").read_text()
    assert "| create@q1k1 | µs/queue |" in md and "b310 (B) against a310 (A)" in md
    page = (folder / "compare.html").read_text()
    assert page.count("<img") == 8 and (folder / "plots" / "b310-create-levels.png").stat().st_size > 0
    assert "route@q1k1" in printed.out
