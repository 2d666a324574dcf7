"""A filtered stream run end to end on both brokers (3.10 refuses it before any load), and the Spark reduce's form of
the filter rule against the driver-side one."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rbench.cli import main
from rbench.reduce.messages import wanted_column
from rbench.reduce.small import wanted_rows
from tests.brokers import BROKERS, RABBITMQ_3, Broker
from tests.runhelpers import read, workload_dict


@pytest.mark.parametrize("broker", BROKERS, ids=lambda b: b.name)
def test_a_filtered_run_counts_only_the_wanted_messages_and_says_what_the_consumer_dropped(
        broker: Broker, unique_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broker.require()
    data = workload_dict(broker.amqp_url, unique_name, driver="stream", producers=2, consumers=1, rate=300, duration=3,
                         warmup=1, drain_timeout=3, consumer={"prefetch": 0, "multi_ack_every": 0, "filter": ["eu"]},
                         publisher={"confirm": True, "filter": {"values": ["eu", "us"], "weights": [1, 3]}})
    data["clusters"][0]["stream_uris"] = [broker.stream_url]
    data["queues"] = {"name": unique_name, "type": "stream"}
    path = tmp_path / "w.yaml"
    path.write_text(json.dumps(data))                  # JSON is YAML
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--master", "local[2]", "--quiet"])
    out = "".join(capsys.readouterr())
    if broker is RABBITMQ_3:                           # refused after the probe, before any load
        assert code == 2, out
        assert ("cluster local: publisher.filter: stream filtering needs RabbitMQ 3.13 or later; RabbitMQ 3.10.8 "
                "does not have it") in out, out
        return
    assert code == 0, out
    (run_dir,) = [p for p in (tmp_path / "out").iterdir() if (p / "run.json").is_file()]
    (step,) = pq.read_table(run_dir / "report" / "steps.parquet").to_pylist()
    assert step["lost"] == 0 and step["duplicated"] == 0 and 0 < step["consumed_unique"] < step["published"]
    published, consumed = read(run_dir, "published").num_rows, read(run_dir, "consumed").num_rows
    (result,) = json.loads((run_dir / "run.json").read_text())["clusters"][0]["task_results"]
    assert f"the broker sent {consumed + result['filtered']:,} messages to the consumers, which dropped " \
           f"{result['filtered']:,} of them client-side" in out, out
    assert consumed + result["filtered"] <= published


def test_the_spark_form_of_the_filter_rule_keeps_the_same_rows_as_the_drivers(spark: Any) -> None:
    ranges = ((0, 130), (400, 410), (999, 1000))
    producer, seq = np.repeat(np.arange(5), 600), np.tile(np.arange(600), 5) * 3 + 11
    df = spark.createDataFrame(pa.table({"producer": producer, "seq": seq}).to_pandas())
    got = [r[0] for r in df.select(wanted_column(ranges)).collect()]
    assert got == wanted_rows(pa.array(producer), pa.array(seq), ranges).tolist()
    assert 0 < sum(got) < len(got)
