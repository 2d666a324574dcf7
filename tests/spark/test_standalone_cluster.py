"""spark-submit of jobs/run.py to a real standalone cluster (master + worker JVMs on this machine).

Proves what local mode cannot: executors in another JVM reach the driver's control
channel, TaskPlans pickle across processes, and the spark-submit entry point works.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runhelpers import keys, read, run_json, workload_dict

ROOT = Path(__file__).resolve().parents[2]
PORT = "7178"


@pytest.fixture(scope="module")
def standalone() -> Iterator[str]:
    script = ROOT / "scripts" / "spark-standalone.sh"
    env = {**os.environ, "PYTHON": sys.executable}
    started = subprocess.run(["bash", str(script), "start", PORT, "2"], capture_output=True, text=True, env=env, timeout=120)
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(script), "stop", PORT], capture_output=True, env=env, timeout=60)


def test_spark_submit_to_standalone_cluster(standalone: str, amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(workload_dict(amqp_url, unique_name, rate=200, duration=3)))
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([str(Path(venv_bin) / "spark-submit"), "--master", standalone, "--conf", "spark.driver.host=127.0.0.1",
                           str(ROOT / "jobs" / "run.py"), str(f), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = (tmp_path / "out").iterdir()
    info = run_json(run_dir)
    assert info["status"] == "complete" and info["clusters"][0]["tasks"] == 2
    published, consumed = read(run_dir, "published"), read(run_dir, "consumed")
    assert published.num_rows == 2 * 200 * 3
    assert sorted(keys(consumed)) == sorted(keys(published))
    assert "step 1/1" in proc.stdout and "lost 0, duplicated 0" in proc.stdout
