"""Stream runs on both real brokers whose consumers get a message more than once, or must not.

A single-active group on one stream (4.0; 3.10 lacks the feature and is refused before the run): every message
consumed once, the standby's takeover at shutdown re-reads nothing (it starts after the offset the group stored).
Two plain consumers of one stream each read every message for themselves: each is a reader expecting every
message once (docs/reduce.md, "Readers"), so nothing is duplicated, lost or reordered and nothing came again.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from rbench.cli import main
from tests.brokers import BROKERS, RABBITMQ_3, Broker
from tests.runhelpers import read, workload_dict

pytestmark = pytest.mark.parametrize("broker", BROKERS, ids=lambda b: b.name)


def _run(broker: Broker, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
         consumer: dict[str, Any]) -> tuple[int, str, Path | None]:
    """2 s at 150 msg/s after a 1 s warm-up: one producer, two consumers of one stream on ``broker``; reduced."""
    broker.require()
    data = workload_dict(broker.amqp_url, name, driver="stream", producers=1, consumers=2, rate=150, duration=3,
                         warmup=1, drain_timeout=3, consumer={"prefetch": 0, "multi_ack_every": 0, **consumer},
                         broker_metrics={"interval": 1, "management_port": broker.management_port,
                                         "prometheus_port": broker.prometheus_port})
    data["clusters"][0]["stream_uris"] = [broker.stream_url]
    data["queues"] = {"name": name, "type": "stream"}
    path = tmp_path / "w.yaml"
    path.write_text(json.dumps(data))                  # JSON is YAML
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--master", "local[2]", "--quiet"])
    out, err = capsys.readouterr()
    runs = [p for p in (tmp_path / "out").iterdir() if (p / "run.json").is_file()] if (tmp_path / "out").is_dir() else []
    return code, out + err, runs[0] if runs else None


def _figures(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    (step,) = pq.read_table(run_dir / "report" / "steps.parquet").to_pylist()
    (cluster,) = pacsv.read_csv(run_dir / "report" / "clusters.csv").to_pylist()
    return step, cluster


def test_a_single_active_group_consumes_each_message_once_and_the_takeover_rereads_nothing(
        broker: Broker, unique_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, run_dir = _run(broker, unique_name, tmp_path, capsys, {"single_active": True, "offset": "first"})
    if broker is RABBITMQ_3:                           # refused after the probe, before any load
        assert code == 2, out
        assert ("consumer.single_active: single active consumer on streams needs RabbitMQ 3.11 or later; "
                "RabbitMQ 3.10.8 would deliver every message to every consumer of the group") in out, out
        return
    assert code == 0 and run_dir is not None, out
    step, cluster = _figures(run_dir)
    published = read(run_dir, "published").num_rows
    assert step["lost"] == 0 and step["duplicated"] == 0 and step["consumed_unique"] == step["published"] > 0
    assert cluster["run_deliveries"] == cluster["run_consumed_unique"] == published     # the warm-up's too, once
    assert f"consumed {published:,} (deliveries" in out                # the tasks' count: no re-read at shutdown
    assert f"consumed {step['consumed_unique']:,} of {step['consumed_unique']:,} expected copies (each once), lost 0, " \
           "duplicated 0" in out
    assert "delivered again" not in out


def test_two_plain_readers_of_one_stream_each_expect_every_message_once(
        broker: Broker, unique_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, run_dir = _run(broker, unique_name, tmp_path, capsys, {"offset": "first"})
    assert code == 0 and run_dir is not None, out
    step, cluster = _figures(run_dir)
    published = read(run_dir, "published").num_rows
    measured = step["published"]
    assert 0 < measured < published                                   # the warm-up's messages are outside
    assert cluster["run_deliveries"] == cluster["run_consumed_unique"] == 2 * published
    assert cluster["run_duplicated"] == 0 and cluster["run_redelivered"] == 0
    assert step["deliveries"] == step["consumed_unique"] == step["expected"] == 2 * measured
    assert step["duplicated"] == step["lost"] == step["reordered"] == 0
    assert (f"consumed {2 * measured:,} of {2 * measured:,} expected copies (each once), lost 0, duplicated 0, "
            "reordered 0") in out, out
    assert "delivered again" not in out
