"""spark-submit of jobs/run.py to a real standalone cluster (master + worker JVMs on this machine).

Proves what local mode cannot: executors in another JVM reach the driver's control
channel, TaskPlans pickle across processes, and the spark-submit entry point works.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.runhelpers import keys, read, run_json, workload_dict
from tests.standalone import ROOT, SPARK_SUBMIT, spark_submit_env


def test_spark_submit_to_standalone_cluster(standalone: str, amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(workload_dict(amqp_url, unique_name, rate=200, duration=3)))
    proc = subprocess.run([str(SPARK_SUBMIT), "--master", standalone, "--conf", "spark.driver.host=127.0.0.1",
                           str(ROOT / "jobs" / "run.py"), str(f), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=spark_submit_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = (tmp_path / "out").iterdir()
    info = run_json(run_dir)
    assert info["status"] == "complete" and info["clusters"][0]["tasks"] == 2
    published, consumed = read(run_dir, "published"), read(run_dir, "consumed")
    assert published.num_rows == 2 * 200 * 3
    assert sorted(keys(consumed)) == sorted(keys(published))
    assert "step 1/1" in proc.stdout and "lost 0, duplicated 0" in proc.stdout
    (stage,) = info["clusters"][0]["stage_attempts"]        # one run of the stage, and it counted
    assert stage["counted"] and {t["attempt"] for t in stage["tasks"]} == {r["attempt"] for r in info["clusters"][0]["task_results"]}
