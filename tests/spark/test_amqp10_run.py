"""A workload with `driver: amqp10` through the real Spark job, broker and reduce."""
from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

from rbench.config.load import workload_from_dict
from rbench.coordinator.run import run_workload
from rbench.reduce.job import reduce_runs
from tests.runhelpers import keys, read, run_json, workload_dict


def test_an_amqp10_run_writes_parquet_that_reduce_reports_on(spark, amqp_url: str, unique_name: str,
                                                             tmp_path: Path) -> None:
    w = workload_from_dict(workload_dict(amqp_url, unique_name, driver="amqp10", producers=2, consumers=2,
                                         rate=500, duration=3, warmup=1))
    result = run_workload(w, tmp_path, spark, out=io.StringIO())
    assert result.status == "complete"
    info = run_json(result.run_dir)
    assert info["status"] == "complete" and info["driver"] == "amqp10"
    published, consumed = read(result.run_dir, "published"), read(result.run_dir, "consumed")
    assert published.num_rows == pytest.approx(3000, rel=0.02)
    counts = Counter(keys(consumed))
    assert set(counts) == set(keys(published)) and max(counts.values()) == 1     # each message exactly once
    assert published["t_confirmed"].null_count == 0                               # every disposition came back
    (row,) = reduce_runs([result.run_dir], session=spark, render=False).steps
    assert row["publish_rate"] == pytest.approx(1000, rel=0.02)
    # deliveries delayed by a busy machine are caught up inside the same 2 s window, so the
    # consume rate is looser than the publish rate (every message is checked exactly-once above)
    assert row["consume_rate"] == pytest.approx(1000, rel=0.3)
    assert row["lost"] == 0 and row["duplicated"] == 0
