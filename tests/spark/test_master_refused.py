"""A master the user named and Spark cannot give is refused in one line (rbench.spark.SparkStart).

Spark keeps one SparkContext per process and ``getOrCreate`` returns the running one whatever master it
was asked for: an in-process `rbench run --master local[1]` beside a local[2] session once ran on
local[2] and left its session to the next test. The command-line process never has a context before
its own, so only in-process use (tests, notebooks) meets this."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbench.cli import main
from tests.runhelpers import workload_dict


def test_a_master_the_running_context_lacks_is_refused_and_the_context_kept(spark, amqp_url: str, unique_name: str,
                                                                           tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(workload_dict(amqp_url, unique_name, duration=1, rate=10)))
    code = main(["run", str(f), "--out", str(tmp_path / "out"), "--master", "local[1]", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == ["rbench run: --master local[1]: this process already runs a SparkContext on "
                                        "local[2] (Spark keeps one per process); ask for that master or stop the "
                                        "running context first"], err
    assert not list((tmp_path / "out").glob("*/run.json"))             # refused before any run began
    assert spark.sparkContext.master == "local[2]" and spark.sparkContext.parallelize([1, 2]).count() == 2
