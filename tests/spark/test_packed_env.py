"""`make dist`'s archive on a real standalone cluster whose executors do not have rbench.

The worker is started with a default Python that has neither rbench nor pyarrow
(WORKER_PYTHON=/usr/bin/python3), and without the test's PYTHONPATH; the driver runs the
archive's own Python unpacked elsewhere. So the run completes only if
`--archives dist/rbench-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python` ships
everything the executors import (compiled codecs included) and the packed venv is relocatable.
The archive is rebuilt only when rbench's sources changed (scripts/pack_env.py).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tests.runhelpers import keys, read, run_json, workload_dict

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "dist" / "rbench-env.tar.gz"
PORT = "7179"
BARE_PYTHON = "/usr/bin/python3"


def _clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that could lend the executors rbench."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1", **extra}


@pytest.fixture(scope="module")
def archive() -> Path:
    built = subprocess.run([sys.executable, str(ROOT / "scripts" / "pack_env.py")], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    print(built.stdout.splitlines()[-1])
    return ARCHIVE


@pytest.fixture(scope="module")
def bare_standalone() -> Iterator[str]:
    if not Path(BARE_PYTHON).exists():
        pytest.skip(f"{BARE_PYTHON} (a Python without rbench for the executors) is not installed")
    check = subprocess.run([BARE_PYTHON, "-c", "import rbench"], capture_output=True, env=_clean_env(), cwd="/")
    assert check.returncode != 0, f"{BARE_PYTHON} can import rbench: it cannot stand for executors without it"
    script = ROOT / "scripts" / "spark-standalone.sh"
    env = _clean_env(PYTHON=sys.executable, WORKER_PYTHON=BARE_PYTHON, SPARK_START_TIMEOUT="180")
    try:
        started = subprocess.run(["bash", str(script), "start", PORT, "2"], capture_output=True, text=True, env=env, timeout=240)
        assert started.returncode == 0, started.stderr
        yield started.stdout.strip()
    finally:                        # also after a failed start: the JVMs may come up late
        subprocess.run(["bash", str(script), "stop", PORT], capture_output=True, env=env, timeout=60)


@pytest.mark.timeout(900)          # a cold archive build (~4 min on 2 busy cores) plus the run
def test_packed_env_runs_on_executors_without_rbench(archive: Path, bare_standalone: str, amqp_url: str, unique_name: str,
                                                      tmp_path: Path) -> None:
    driver_env = tmp_path / "driver-env"            # not where the venv was built: relocation is exercised
    with tarfile.open(archive) as tar:
        tar.extractall(driver_env, filter="tar")
    names = set(tarfile.open(archive).getnames())
    assert any(n.startswith("lib/python3.11/site-packages/rbench/codec/_amqp091") and n.endswith(".so") for n in names)
    assert not any(n.startswith("lib/python3.11/site-packages/pyspark/") for n in names)   # the cluster's own pyspark is used

    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(workload_dict(amqp_url, unique_name, rate=200, duration=3, exchange={"name": ""})))
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = _clean_env(PYSPARK_DRIVER_PYTHON=str(driver_env / "bin" / "python"), PYSPARK_PYTHON="./env/bin/python",
                     SPARK_HOME=str(Path(pyspark.__file__).parent))   # the Spark installation: the dev venv's pip package
    proc = subprocess.run([str(spark_submit), "--master", bare_standalone, "--conf", "spark.driver.host=127.0.0.1",
                           "--archives", f"{archive}#env", "--conf", "spark.pyspark.python=./env/bin/python",
                           "--conf", f"spark.pyspark.driver.python={driver_env / 'bin' / 'python'}",
                           str(ROOT / "jobs" / "run.py"), str(workload), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "out").iterdir()
    info = run_json(run_dir)
    assert info["status"] == "complete" and info["clusters"][0]["tasks"] == 2
    published, consumed = read(run_dir, "published"), read(run_dir, "consumed")
    # every message published was consumed once; how close to the target rate a loaded machine
    # gets is the rate tests' business, not this one's
    assert 0 < published.num_rows <= 2 * 200 * 3
    assert sorted(keys(consumed)) == sorted(keys(published))
    assert "lost 0, duplicated 0" in proc.stdout
    # the archive was unpacked beside the executor (their default Python, /usr/bin/python3, has no rbench)
    work = Path(f"/tmp/rbench-spark-{PORT}/work")
    app_dirs = sorted(work.glob("app-*"), key=lambda p: p.stat().st_mtime)
    assert app_dirs and any((d / "env" / "bin" / "python").exists() for d in app_dirs[-1].iterdir() if d.is_dir())
    shutil.rmtree(app_dirs[-1], ignore_errors=True)
