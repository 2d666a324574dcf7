"""`rbench compare --amqp10` on the real brokers: the same broker under two names shows no difference.

The A/A test runs RabbitMQ 3.10's AMQP 1.0 plugin (port 5672) under two names at a fixed 1,000 msg/s
(open loop, 2,000 messages): the rates then follow the schedule (the end-to-end rate is 1,000 msg/s less
the last messages' latency; a receiver that fell behind catches up faster), and their intervals must
contain 1; latency and CPU are compared (each round measured them) but, being noisy on a shared
machine, left to their intervals. The 3.10/4.0 test (4.0 native, v2 addresses) checks the files and their shape, not
which broker is faster. Load: 6 × 2 s + 4 × 2 s of sending, about 45 s with the processes' start.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbench.cli import main
from rbench.compare.amqp10 import METRICS
from tests.brokers import RABBITMQ_3, RABBITMQ_4

pytestmark = pytest.mark.timeout(180)
RATES = ("end_to_end_rate", "sender_rate", "receiver_rate")


def _folder(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.name.endswith("-amqp10-compare")]
    return folder


def test_a_broker_compared_with_itself_shows_no_difference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    RABBITMQ_3.require()
    url = RABBITMQ_3.amqp_url
    code = main(["compare", "--amqp10", f"a310={url}", f"b310={url}", "--rounds", "3", "--rate", "1000",
                 "--count", "2000", "--body-size", "24", "--out", str(tmp_path), "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    folder = _folder(tmp_path)
    doc = json.loads((folder / "compare.json").read_text())
    assert (doc["a"], doc["b"], doc["mode"]) == ("a310", "b310", "amqp10")
    assert [r["order"] for r in doc["rounds"]] == [["a310", "b310"], ["b310", "a310"], ["a310", "b310"]]
    assert set(doc["metrics"]) == {m.name for m in METRICS}
    for name in RATES:
        m = doc["metrics"][name]
        lo, hi = m["ci"]
        assert lo <= 1.0 <= hi and m["verdict"].startswith("no difference shown at 95 %"), (name, m)
    e2e = doc["metrics"]["end_to_end_rate"]                 # the schedule's 1,000 msg/s, less the last messages' latency
    assert all(600 < v < 1100 for v in e2e["a"] + e2e["b"]), e2e
    for m in doc["metrics"].values():
        assert m["ratio"] is not None and m["ci"][0] <= m["ratio"] <= m["ci"][1], m
    # each round's run is `rbench amqp10 --output`: its summary.json and samples, inside the comparison's folder
    runs = [Path(x["run_dir"]) for r in doc["rounds"] for x in r["runs"]]
    assert len(set(runs)) == 6 and all(p.parent == folder for p in runs)
    for p in runs:
        assert json.loads((p / "summary.json").read_text())["results"]["message_count"] == 2000
        assert (p / "samples.parquet").is_file()
    assert "end_to_end_rate" in printed.out and "no difference shown" in printed.out
    assert (folder / "compare.md").is_file() and (folder / "plots" / "b310-end_to_end_rate.png").stat().st_size > 0


def test_3_10_plugin_against_4_0_native_writes_the_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    RABBITMQ_3.require()
    RABBITMQ_4.require()
    code = main(["compare", "--amqp10", RABBITMQ_3.amqp_url, RABBITMQ_4.amqp_url + "?address=v2", "--rounds", "2",
                 "--count", "2000", "--rate", "1000", "--out", str(tmp_path), "--quiet"])
    assert code == 0, capsys.readouterr().err
    folder = _folder(tmp_path)
    doc = json.loads((folder / "compare.json").read_text())
    assert (doc["a"], doc["b"]) == ("127.0.0.1:5672", "127.0.0.1:5680")
    for m in doc["metrics"].values():
        assert len(m["a"]) == len(m["b"]) == 2 and None not in m["a"] + m["b"], m
        assert m["verdict"].startswith(("127.0.0.1:5680 ", "no difference shown")), m["verdict"]
    md = (folder / "compare.md").read_text()
    assert "| end_to_end_rate | msg/s |" in md and "127.0.0.1:5680 (B) against 127.0.0.1:5672 (A)" in md
    assert "getrusage" in doc["method"]
