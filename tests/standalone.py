"""A Spark standalone cluster on this machine for the tests (scripts/spark-standalone.sh), and spark-submit's environment."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "spark-standalone.sh"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


def spark_submit_env() -> dict[str, str]:
    """The environment for spark-submit of jobs/*.py with this venv's Python on the driver and the executors."""
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


@contextmanager
def standalone_cluster(port: str, cores: str, **env: str) -> Iterator[str]:
    """spark://127.0.0.1:PORT (a master and one worker with CORES task slots) for the block; stopped after it,
    also after a failed start (the JVMs may come up late) or a failed test."""
    full_env = {**os.environ, "PYTHON": sys.executable, **env}
    try:
        started = subprocess.run(["bash", str(SCRIPT), "start", port, cores], capture_output=True, text=True,
                                 env=full_env, timeout=240)
        assert started.returncode == 0, started.stderr
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", port], capture_output=True, env=full_env, timeout=60)
